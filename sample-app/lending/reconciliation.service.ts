import { hostname } from 'node:os';
import { Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { LockService, WriteLock } from '../nestjs-db-lock.js';
import { Reconciliation } from './entities/reconciliation.entity.js';

export interface ReconciliationResult {
  balanced: boolean;
  /** What investors received: sum of (balance - opening balance). */
  paidOutCents: number;
  /** What borrowers repaid: sum of the loans' repaid amounts. */
  repaidCents: number;
  /** Same, from the repayment rows and from the claims: all four must agree. */
  recordedCents: number;
  receivedCents: number;
  /** Loans where outstanding + repaid != principal. */
  loansOff: number;
}

/**
 * Checks that money is conserved: every cent a borrower repaid reached exactly one investor.
 *
 * Every instance schedules it; the lock makes it a cluster singleton. `onLocked: 'skip'` tries
 * the lock once (timeout 0): the instance that gets it runs the check, the others resolve
 * `undefined` at once instead of queuing up to run it again right after. Every minute so the
 * sample shows it; nightly in real life.
 */
@Injectable()
export class ReconciliationService {
  private readonly logger = new Logger(ReconciliationService.name);

  constructor(private readonly locks: LockService) {}

  @Cron(CronExpression.EVERY_MINUTE, { name: 'reconciliation' })
  @WriteLock('reconciliation', { onLocked: 'skip' })
  async reconcile(): Promise<ReconciliationResult | undefined> {
    const em = this.locks.manager;
    // One statement: InnoDB and PostgreSQL both read all of it from one snapshot even at READ
    // COMMITTED, so it sees each repayment whole or not at all while repayments keep running on
    // other loans. Aliases are snake_case: PostgreSQL folds unquoted names to lower case.
    const [row] = (await em.query(`
      SELECT
        (SELECT COALESCE(SUM(balance_cents - opening_cents), 0) FROM p2p_investor) AS paid_out,
        (SELECT COALESCE(SUM(repaid_cents), 0) FROM p2p_loan) AS repaid,
        (SELECT COALESCE(SUM(cents), 0) FROM p2p_repayment) AS recorded,
        (SELECT COALESCE(SUM(received_cents), 0) FROM p2p_claim) AS received,
        (SELECT COUNT(*) FROM p2p_loan WHERE outstanding_cents + repaid_cents <> principal_cents) AS loans_off
    `)) as Record<'paid_out' | 'repaid' | 'recorded' | 'received' | 'loans_off', string>[];
    const result: ReconciliationResult = {
      paidOutCents: Number(row!.paid_out),
      repaidCents: Number(row!.repaid),
      recordedCents: Number(row!.recorded),
      receivedCents: Number(row!.received),
      loansOff: Number(row!.loans_off),
      balanced: false,
    };
    result.balanced =
      result.loansOff === 0 &&
      result.paidOutCents === result.repaidCents &&
      result.recordedCents === result.repaidCents &&
      result.receivedCents === result.repaidCents;
    const holder = `${hostname()}:${process.pid}`; // as the lock log names holders
    await em.insert(Reconciliation, { holder, balanced: result.balanced, paidOutCents: result.paidOutCents, repaidCents: result.repaidCents });
    if (result.balanced) this.logger.log(`Reconciliation: balanced, ${result.repaidCents} cents repaid and paid out`);
    else this.logger.error(`Reconciliation: NOT balanced: ${JSON.stringify(result)}`);
    return result;
  }
}
