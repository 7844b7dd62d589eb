import { Controller, Get } from '@nestjs/common';
import type { Investor } from './entities/investor.entity.js';
import { LoansService } from './loans.service.js';

@Controller('investors')
export class InvestorsController {
  constructor(private readonly loans: LoansService) {}

  /** Every account with its balance: watch repayments arrive. */
  @Get()
  list(): Promise<Investor[]> {
    return this.loans.investors();
  }
}
