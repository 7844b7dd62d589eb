import { AddProcessLeasesAndRowLocks1795392000000 } from './add-process-leases-and-row-locks.migration.js';
import { CreateDbLockTables1763769600000 } from './create-db-lock-tables.migration.js';
import { AddSemaphores1795996800000 } from './add-semaphores.migration.js';
import { AddRowLockFastPath1796342400000 } from './add-row-lock-fast-path.migration.js';
import { AddCommitRoutines1796947200000 } from './add-commit-routines.migration.js';
import { AddBeginAndTakeRoutine1797552000000 } from './add-begin-and-take-routine.migration.js';
import { AddTokenClaims1798156800000 } from './add-token-claims.migration.js';
import { DropLogGrantTimeIndex1798761600000 } from './drop-log-grant-time-index.migration.js';
import { AddLiveHolderIndex1799366400000 } from './add-live-holder-index.migration.js';

export {
  AddBeginAndTakeRoutine1797552000000,
  AddLiveHolderIndex1799366400000,
  AddCommitRoutines1796947200000,
  AddProcessLeasesAndRowLocks1795392000000,
  AddRowLockFastPath1796342400000,
  AddSemaphores1795996800000,
  AddTokenClaims1798156800000,
  CreateDbLockTables1763769600000,
  DropLogGrantTimeIndex1798761600000,
};

/**
 * Every schema migration of the library, oldest first: `migrations: [...mine, ...DB_LOCK_MIGRATIONS]`,
 * or assigned directly to `DataSourceOptions.migrations` (a plain array type, frozen at run time).
 * Upgrading the library may add migrations here; shipped ones never change the schema they make (a fix
 * may make one safer to run: serialized across processes, re-runnable after a failure).
 */
export const DB_LOCK_MIGRATIONS: Function[] = Object.freeze([
  CreateDbLockTables1763769600000,
  AddProcessLeasesAndRowLocks1795392000000,
  AddSemaphores1795996800000,
  AddRowLockFastPath1796342400000,
  AddCommitRoutines1796947200000,
  AddBeginAndTakeRoutine1797552000000,
  AddTokenClaims1798156800000,
  DropLogGrantTimeIndex1798761600000,
  AddLiveHolderIndex1799366400000,
]) as unknown as Function[];
