import { DbLockSchemaError } from '../../errors/db-lock-schema.error.js';
import type { LockConnectionPool } from './lock-connection-pool.js';
import { LockStatementError } from '../lock-statement.error.js';
import { ROUTINES_PRESENT, type SessionRoutine } from './session-routines.sql.js';
import { CLAIM_INDEX, LOCK_LOG_TABLE, LOCK_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE, rowsOf } from './sql.js';

/** What the schema check found beside the required tables. */
export interface SchemaFeatures {
  /** The optional session routines present (see session-routines.sql.ts). */
  readonly routines: ReadonlySet<SessionRoutine>;
  /** The claim index is there: grants hand out tokens above claims, and a key known free is granted by one INSERT. */
  readonly claims: boolean;
}

const CLAIMS_PRESENT = `SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '${LOCK_LOG_TABLE}' AND INDEX_NAME = '${CLAIM_INDEX}'`;

/** Whether tokens are claimed now (AddTokenClaims may have run since this process started). */
export async function claimsPresent(pool: LockConnectionPool): Promise<boolean> {
  return Number(rowsOf(await pool.query(CLAIMS_PRESENT, { purpose: 'janitor' }))[0]?.n ?? 0) > 0;
}

/**
 * Fails with DbLockSchemaError naming the migrations when the tables are missing or old; says
 * which of the optional session routines are there (see session-routines.sql.ts), and whether
 * tokens are claimed (AddTokenClaims).
 */
export async function checkSchema(pool: LockConnectionPool): Promise<SchemaFeatures> {
  const sql =
    `SELECT lock_key, fencing_token, writer_waiting_until, last_granted_at, semaphore_limit, no_lease_holders FROM ${LOCK_TABLE} LIMIT 0;\n` +
    `SELECT id, lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note, process_id, strategy, fenced_count FROM ${LOCK_LOG_TABLE} LIMIT 0;\n` +
    `SELECT id, holder, started_at, renewed_at, ended_count FROM ${PROCESS_TABLE} LIMIT 0;\n` +
    `SELECT lock_key FROM ${ROW_LOCK_TABLE} LIMIT 0;\n` +
    ROUTINES_PRESENT +
    `;\n${CLAIMS_PRESENT}`;
  try {
    const results = (await pool.query(sql, { purpose: 'admin' })) as unknown[];
    return {
      routines: new Set(rowsOf(results[4]).map((row) => row.name as SessionRoutine)),
      claims: Number(rowsOf(results[5])[0]?.n ?? 0) > 0,
    };
  } catch (error) {
    const failure = LockStatementError.from(error);
    if (failure.kind === 'schema') {
      throw new DbLockSchemaError(
        `The lock tables are missing or out of date (${(failure.driverError as Error).message}). Run the library's migrations ` +
          `(DB_LOCK_MIGRATIONS from 'nestjs-db-lock': CreateDbLockTables1763769600000, AddProcessLeasesAndRowLocks1795392000000, AddSemaphores1795996800000, AddRowLockFastPath1796342400000, AddCommitRoutines1796947200000, AddBeginAndTakeRoutine1797552000000, AddTokenClaims1798156800000, DropLogGrantTimeIndex1798761600000, AddLiveHolderIndex1799366400000) before starting the app.`,
        { cause: failure.driverError },
      );
    }
    throw failure;
  }
}
