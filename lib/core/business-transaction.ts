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
