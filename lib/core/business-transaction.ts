import type { DataSource } from 'typeorm';
import type { LockTransaction } from './held-lock.js';
import type { LockIsolationLevel } from './locked-call.options.js';

/**
 * A new transaction on the app's DataSource (a second connection while the caller may hold one:
 * REQUIRES_NEW), for a fenced call whose lock does not bring its own transaction.
 */
export async function openBusinessTransaction(dataSource: DataSource, isolationLevel: LockIsolationLevel): Promise<LockTransaction> {
  const runner = dataSource.createQueryRunner('master');
  try {
    await runner.startTransaction(isolationLevel);
  } catch (error) {
    await runner.release().catch(() => undefined);
    throw error;
  }
  return { runner, finish: () => runner.release() };
}

/**
 * The business transaction of a lease-locked 'requires-new' call, opened while its first grant
 * try is on the wire: its two round trips (isolation level, START TRANSACTION) overlap the
 * grant's instead of following it. Nothing the work sees changes: START TRANSACTION takes no
 * snapshot and no lock (the first read does, and the work runs only after the grant), so the
 * transaction is the same as one opened after the grant.
 *
 * A connection must never be held while waiting for a lock (the holder's own fenced commit may
 * need one from the same pool): as soon as the grant is known not to be immediate, or the call
 * turns out not to need it, the transaction is rolled back and its connection given back, and the
 * call opens a fresh one after its grant as before.
 */
export class EarlyBusinessTransaction {
  private opening: Promise<LockTransaction> | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly isolationLevel: LockIsolationLevel,
  ) {}

  /** Starts opening (once). */
  open(): void {
    if (this.opening) return;
    this.opening = openBusinessTransaction(this.dataSource, this.isolationLevel);
    this.opening.catch(() => undefined); // a failure is reported by take(), or nowhere if dropped
  }

  /** The transaction being opened, for the call to use; undefined if it was never opened or dropped. */
  take(): Promise<LockTransaction> | undefined {
    const opening = this.opening;
    this.opening = undefined;
    return opening;
  }

  /** Not needed (or not now): rolled back and its connection given back once it has opened. */
  drop(): void {
    const opening = this.take();
    if (!opening) return;
    void opening.then(
      async (transaction) => {
        await transaction.runner.rollbackTransaction().catch(() => undefined);
        await transaction.finish(false).catch(() => undefined);
      },
      () => undefined,
    );
  }
}
