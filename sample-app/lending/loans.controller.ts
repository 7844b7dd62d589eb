import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import { LockService, type LockInfo } from '../nestjs-db-lock.js';
import { LoanParams } from './dto/params.dto.js';
import { RepayDto } from './dto/repay.dto.js';
import { LoansService, type LoanStatement } from './loans.service.js';
import { type RepaymentReceipt, RepaymentsService } from './repayments.service.js';
import type { Loan } from './entities/loan.entity.js';

/**
 * Routes only: parsing and validation happen before a handler runs (DTOs + the global
 * ValidationPipe, so a bad request never takes a lock), locking and rules in the services.
 */
@Controller('loans')
export class LoansController {
  constructor(
    private readonly loans: LoansService,
    private readonly repayments: RepaymentsService,
    private readonly locks: LockService,
  ) {}

  @Get()
  list(): Promise<Loan[]> {
    return this.loans.list();
  }

  /** The loan and its claims, consistent with each other (read lock). 404 if unknown. */
  @Get(':id')
  statement(@Param() { id }: LoanParams): Promise<LoanStatement> {
    return this.loans.statement(id);
  }

  /** 201 with the receipt; 400 bad input, 404 unknown loan, 409 more than outstanding, 423 lock busy. */
  @Post(':id/repay')
  repay(@Param() { id }: LoanParams, @Body() body: RepayDto): Promise<RepaymentReceipt> {
    return this.repayments.repay(id, body.cents);
  }

  /** Who holds the loan's lock right now, in which mode, until when (database server clock). */
  @Get(':id/lock')
  lock(@Param() { id }: LoanParams): Promise<LockInfo> {
    return this.locks.inspect(`loan:${id}`);
  }
}
