import { Body, Controller, Get, Param, ParseIntPipe, Post } from '@nestjs/common';
import { LockService, type LockInfo } from '../../lib/index.js';
import { LoansService } from './loans.service.js';

@Controller('loans')
export class LoansController {
  constructor(
    private readonly loans: LoansService,
    private readonly locks: LockService,
  ) {}

  @Post(':id/repay')
  repay(@Param('id', ParseIntPipe) id: number, @Body() body: { cents?: number }) {
    return this.loans.repay(id, Number(body?.cents ?? 100));
  }

  @Post(':id/transfer')
  transfer(@Param('id', ParseIntPipe) id: number, @Body() body: { to?: string }) {
    return this.loans.transferClaim(id, String(body?.to ?? 'investor-1'));
  }

  /** Who holds the loan's lock right now (server clock). */
  @Get(':id/lock')
  lock(@Param('id', ParseIntPipe) id: number): Promise<LockInfo> {
    return this.locks.inspect(`loan:${id}`);
  }

  @Get('/stats/locks')
  stats() {
    return this.locks.stats();
  }
}
