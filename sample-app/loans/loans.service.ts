import { Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { DistributedLock, LockService, ReadLock, WriteLock } from '../../lib/index.js';
import { Loan } from './loan.entity.js';

/**
 * Seed 004's P2P case. A repayment changes the loan: it takes the loan's WRITE lock, so it excludes
 * every other repayment and transfer of that loan across the cluster. Claim transfers only read
 * the loan: they take READ locks and run side by side. Both run in a fenced transaction: if the
 * lock was lost meanwhile, nothing commits.
 */
@Injectable()
export class LoansService {
  private readonly logger = new Logger(LoansService.name);
  /** How many nightly reconciliations this node ran (the sample shows one node per run). */
  reconciliations = 0;

  constructor(private readonly locks: LockService) {}

  @WriteLock('loan:{0}', { timeoutMs: 5_000 })
  async repay(loanId: number, cents: number): Promise<Loan> {
    const loans = this.locks.manager.getRepository(Loan);
    const loan = await loans.findOneByOrFail({ id: loanId });
    loan.balance -= cents;
    loan.repayments += 1;
    return loans.save(loan);
  }

  @ReadLock('loan:{0}')
  async transferClaim(loanId: number, toInvestor: string): Promise<{ loanId: number; balance: number; toInvestor: string; fencingToken: number }> {
    const loan = await this.locks.manager.getRepository(Loan).findOneByOrFail({ id: loanId });
    return { loanId, balance: loan.balance, toInvestor, fencingToken: this.locks.currentLock!.fencingToken };
  }

  /** Every node fires this cron; the lock lets exactly one run it, the others skip quietly. */
  @Cron(CronExpression.EVERY_30_SECONDS)
  @DistributedLock({ key: 'nightly-reconciliation', onLocked: 'skip', transaction: 'none' })
  async reconcile(): Promise<void> {
    this.reconciliations++;
    this.logger.log(`reconciliation #${this.reconciliations} ran on this node`);
  }
}
