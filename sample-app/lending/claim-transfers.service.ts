import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { LockService } from '../nestjs-db-lock.js';
import { Claim } from './entities/claim.entity.js';
import { ClaimTransfer } from './entities/claim-transfer.entity.js';
import { Investor } from './entities/investor.entity.js';

export interface ClaimTransferReceipt {
  transferId: number;
  loanId: number;
  claimId: number;
  fromInvestorId: number;
  toInvestorId: number;
  /** Token of the claim's write lock. */
  fencingToken: number;
}

/** An investor sells a claim to another investor. */
@Injectable()
export class ClaimTransfersService {
  constructor(private readonly locks: LockService) {}

  /**
   * Two locks, taken together (all-or-nothing, in one global key order, so never a deadlock):
   * - the loan for READING: transfers of the same loan touch only their own claim, so any number
   *   of them run side by side, but none while a repayment (a writer) rewrites the claims;
   * - the claim for WRITING: two sales of one claim must not interleave.
   *
   * This is `@ReadLock('loan:{0}')` plus a write lock on the claim. A decorator takes one mode for
   * all its keys, so mixed modes use `runLocked`, the call the decorators forward to: same fenced
   * transaction (writes through `locks.manager`), same FAILED-on-throw, same module timeout.
   */
  async transfer(loanId: number, claimId: number, buyerId: number): Promise<ClaimTransferReceipt> {
    const claimKey = `claim:${claimId}`;
    const keys = [
      { key: `loan:${loanId}`, mode: 'read' as const },
      { key: claimKey, mode: 'write' as const },
    ];
    return this.locks.runLocked(keys, async (lock) => {
      const em = this.locks.manager;
      // Looked up with its loan: a claim id that belongs to another loan is not found here.
      const claim = await em.findOneBy(Claim, { id: claimId, loanId });
      if (!claim) throw new NotFoundException(`Loan ${loanId} has no claim ${claimId}`);
      if (!(await em.existsBy(Investor, { id: buyerId }))) throw new NotFoundException(`Investor ${buyerId} not found`);
      // Checked under the lock: the owner is only known for sure while nobody else can sell it.
      if (claim.investorId === buyerId) throw new ConflictException(`Investor ${buyerId} already holds claim ${claimId}`);

      await em.update(Claim, { id: claimId }, { investorId: buyerId, transfers: claim.transfers + 1 });
      const fencingToken = lock.fencingTokens[claimKey]!;
      const { identifiers } = await em.insert(ClaimTransfer, { claimId, loanId, fromInvestorId: claim.investorId, toInvestorId: buyerId, fencingToken });
      return { transferId: Number(identifiers[0]!.id), loanId, claimId, fromInvestorId: claim.investorId, toInvestorId: buyerId, fencingToken };
    });
  }
}
