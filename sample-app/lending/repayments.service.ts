import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { LockService, WriteLock } from '../nestjs-db-lock.js';
import { Claim } from './entities/claim.entity.js';
import { Investor } from './entities/investor.entity.js';
import { Loan } from './entities/loan.entity.js';
import { Repayment } from './entities/repayment.entity.js';
import { splitProRata } from './pro-rata.js';

export interface RepaymentReceipt {
  repaymentId: number;
  loanId: number;
  cents: number;
  outstandingCents: number;
  fencingToken: number;
  /** Who got what, by investor. */
  payouts: { investorId: number; cents: number }[];
}

/**
 * A borrower repays part of a loan: the money is split over the loan's claims and paid into the
 * account of each claim's current owner.
 */
@Injectable()
export class RepaymentsService {
  constructor(private readonly locks: LockService) {}

  /**
   * WRITE lock on the loan: this reads the loan and every claim, then writes them back. No other
   * repayment and no claim transfer of this loan may run in between, on any instance: a transfer
   * halfway through would leave a payout with the seller while the claim moved to the buyer.
   *
   * It runs in a fenced transaction (the decorator's default): every write goes through
   * `locks.manager`, and COMMIT happens only if the lock is still ours. A NotFound/Conflict
   * thrown here rolls everything back, marks the lock FAILED and reaches the client unchanged.
   * The wait for the lock is the module's `timeoutMs` (LOCK_TIMEOUT_MS): after it, 423.
   */
  @WriteLock('loan:{0}')
  async repay(loanId: number, cents: number): Promise<RepaymentReceipt> {
    const em = this.locks.manager;
    const loan = await em.findOneBy(Loan, { id: loanId });
    if (!loan) throw new NotFoundException(`Loan ${loanId} not found`);
    if (cents > loan.outstandingCents)
      throw new ConflictException(`Loan ${loanId} has ${loan.outstandingCents} cents outstanding: a repayment of ${cents} is too much`);

    const claims = await em.find(Claim, { where: { loanId }, order: { id: 'ASC' } });
    const shares = splitProRata(cents, claims.map((c) => c.principalCents));
    const payouts = new Map<number, number>();
    for (const [i, claim] of claims.entries()) {
      const share = shares[i]!;
      if (share === 0) continue;
      await em.increment(Claim, { id: claim.id }, 'receivedCents', share);
      payouts.set(claim.investorId, (payouts.get(claim.investorId) ?? 0) + share);
    }
    // Accounts in id order: repayments of *different* loans run at the same time and can pay the
    // same investor. One order everywhere makes them queue on the row locks instead of deadlocking.
    const byInvestor = [...payouts].sort(([a], [b]) => a - b);
    for (const [investorId, amount] of byInvestor) await em.increment(Investor, { id: investorId }, 'balanceCents', amount);

    // Read-modify-write in application code: safe because nobody else writes this loan now.
    const outstandingCents = loan.outstandingCents - cents;
    await em.update(Loan, { id: loanId }, { outstandingCents, repaidCents: loan.repaidCents + cents, repayments: loan.repayments + 1 });
    const fencingToken = this.locks.currentLock!.fencingToken;
    const { identifiers } = await em.insert(Repayment, { loanId, cents, fencingToken });
    return {
      repaymentId: Number(identifiers[0]!.id),
      loanId,
      cents,
      outstandingCents,
      fencingToken,
      payouts: byInvestor.map(([investorId, amount]) => ({ investorId, cents: amount })),
    };
  }
}
