import { Injectable, NotFoundException } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockService, ReadLock } from '../nestjs-db-lock.js';
import { Claim } from './entities/claim.entity.js';
import { Investor } from './entities/investor.entity.js';
import { Loan } from './entities/loan.entity.js';

export interface LoanStatement extends Loan {
  claims: Claim[];
}

/** Read side: loans with their claims, investors' balances. */
@Injectable()
export class LoansService {
  constructor(
    private readonly locks: LockService,
    private readonly dataSource: DataSource,
  ) {}

  /**
   * READ lock on the loan: the loan row and its claims are two queries, and a repayment
   * committing between them would show claims that do not add up to the loan. Readers share the
   * lock (with transfers too), a repayment waits for them and they wait for it.
   */
  @ReadLock('loan:{0}')
  async statement(loanId: number): Promise<LoanStatement> {
    const em = this.locks.manager;
    const loan = await em.findOneBy(Loan, { id: loanId });
    if (!loan) throw new NotFoundException(`Loan ${loanId} not found`);
    const claims = await em.find(Claim, { where: { loanId }, order: { id: 'ASC' } });
    return { ...loan, claims };
  }

  /** A list for people: no lock, each row is as committed when read. */
  list(): Promise<Loan[]> {
    return this.dataSource.getRepository(Loan).find({ order: { id: 'ASC' } });
  }

  investors(): Promise<Investor[]> {
    return this.dataSource.getRepository(Investor).find({ order: { id: 'ASC' } });
  }
}
