/**
 * The blocking database locks users write by hand, each waiting caller parked in the server on a
 * connection of its own: a transaction holding a row with `SELECT … FOR UPDATE` (COMMIT releases;
 * the critical section runs in that transaction, as such code is written), and the named lock
 * `GET_LOCK` (the critical section on the same connection). Both are the floors the library's
 * contention figures are compared with.
 */
import { BEGIN_AND_TAKE, RECORD_AND_COMMIT } from '../../../lib/store/mysql/session-routines.sql.js';
import { hostNow } from '../stats.js';
import { countedQuery, type DesignDeps, type DesignId, type LockDesign, type Query, timedHold } from './types.js';

/**
 * A hold as one transaction on the caller's own connection, as such code is written: `take` locks
 * the row, the critical section runs in the transaction, `beforeCommit` writes what the hold
 * leaves behind, and COMMIT hands the row over.
 */
function transactionDesign(
  deps: DesignDeps,
  id: DesignId,
  usefulStatements: number,
  design: {
    prepare(query: Query, key: string): Promise<unknown>;
    /** Takes the lock in the transaction START TRANSACTION opened; or `openAndTake`, one statement that opens it and takes the lock. */
    take: { inTransaction(query: Query, key: string): Promise<unknown> } | { openAndTake(query: Query, key: string): Promise<unknown> };
    beforeCommit?(query: Query, key: string): Promise<unknown>;
    /** Sent instead of `beforeCommit` and COMMIT: a statement that writes what the hold leaves behind and commits. */
    commitWith?(query: Query, key: string): Promise<unknown>;
  },
): LockDesign {
  return countedDesign(
    id,
    usefulStatements,
    async (key) => design.prepare(countedQuery(await deps.slots.get(0), { sent: 0 }), key),
    async (key, body, counter, slot) => {
      const query = countedQuery(await deps.slots.get(slot), counter);
      const take = design.take;
      if ('inTransaction' in take) await query('START TRANSACTION');
      try {
        await ('inTransaction' in take ? take.inTransaction(query, key) : take.openAndTake(query, key));
        const acquiredAt = hostNow();
        await body(query);
        const releasingAt = hostNow();
        if (design.commitWith) await design.commitWith(query, key);
        else {
          await design.beforeCommit?.(query, key);
          await query('COMMIT');
        }
        return { acquiredAt, releasingAt };
      } catch (error) {
        await query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    },
  );
}

/** A design that counts the round trips its holds send (`counter`, given to each hold). */
export function countedDesign(
  id: DesignId,
  usefulStatements: number,
  prepare: (key: string) => Promise<unknown>,
  hold: (
    key: string,
    body: (query: Query) => Promise<void>,
    counter: { sent: number },
    slot: number,
  ) => Promise<{ acquiredAt: number; releasingAt: number }>,
): LockDesign {
  const counter = { sent: 0 };
  return {
    id,
    usefulStatements,
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare(key) {
      await prepare(key);
    },
    hold: (key, slot, body) => hold(key, body, counter, slot),
    roundTrips: () => counter.sent,
    redisCommands: () => 0,
    async close() {},
  };
}

export function forUpdateDesign(deps: DesignDeps): LockDesign {
  // START TRANSACTION, SELECT … FOR UPDATE, COMMIT + critical section
  return transactionDesign(deps, 'for-update', 3 + 2, {
    prepare: (query, key) => query('INSERT IGNORE INTO bench_row_lock (k) VALUES (?)', [key]),
    take: {
      async inTransaction(query, key) {
        const rows = await query('SELECT k FROM bench_row_lock WHERE k = ? FOR UPDATE', [key]);
        if (rows.length !== 1) throw new Error(`bench_row_lock has no row '${key}'`);
      },
    },
  });
}

/** START and the locking UPDATE (the key's row of db_lock locked, its token bumped) in one CALL, as the library sends them where the routine is installed. */
export const OPEN_AND_TAKE = `CALL \`${BEGIN_AND_TAKE}\`(?)`;
/**
 * The key row with its lease marker set, as a row-lock writer leaves it: the routine's UPDATE then
 * matches it. A row it does not match is not taken (at READ COMMITTED not even locked), which the
 * library answers with its rare path and a hand-written hold must not ignore.
 */
export const PREPARE_KEY_ROW = 'INSERT INTO db_lock (lock_key, no_lease_holders) VALUES (?, 1) ON DUPLICATE KEY UPDATE no_lease_holders = 1';

/** The routine's answer says it took the row; anything else is a broken floor, not a slower one. */
export function tookTheRow(answer: unknown, key: string): void {
  const row = (answer as Record<string, unknown>[][])[0]?.[0];
  if (Number(row?.taken) !== 1) throw new Error(`the begin-and-take routine did not take the row of '${key}'`);
}

/** A by-hand hold's key row and its take: one CALL of the begin-and-take routine, checked to have taken the row. */
const BY_HAND_TAKE = {
  prepare: (query: Query, key: string) => query(PREPARE_KEY_ROW, [Buffer.from(key)]),
  take: { openAndTake: async (query: Query, key: string) => tookTheRow(await query(OPEN_AND_TAKE, [Buffer.from(key)]), key) },
};

/**
 * A row-lock hold's own statements sent by hand on a plain connection, the floor of the row-lock
 * strategy under contention: the transaction opened and the key's row locked in one CALL of the
 * begin-and-take routine, the critical section, then the audit row and COMMIT (which hands the
 * row over) in one CALL of the record-and-commit routine, as the library sends them.
 */
export function rowLockByHandDesign(deps: DesignDeps): LockDesign {
  // CALL (START + the locking UPDATE), CALL (audit row + COMMIT) + critical section
  return transactionDesign(deps, 'row-lock-hand', 2 + 2, {
    ...BY_HAND_TAKE,
    commitWith: (query, key) =>
      query(`CALL \`${RECORD_AND_COMMIT}\`(?, 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`, [Buffer.from(key)]),
  });
}

/**
 * The by-hand hold without its audit row: the transaction opened and the key's row locked (its
 * token bumped) in one CALL, the critical section, then a plain COMMIT. Not a design anyone should
 * ship (a committed hold would leave no record); it measures what writing the audit row inside the
 * hold, while the key is locked, costs a hot key.
 */
export function rowLockByHandNoAuditDesign(deps: DesignDeps): LockDesign {
  // CALL (START + the locking UPDATE), COMMIT + critical section
  return transactionDesign(deps, 'row-lock-hand-no-audit', 2 + 2, {
    ...BY_HAND_TAKE,
  });
}

/** The audit row as the record-and-commit routine writes it, into `table`, inside a routine taking `p_key`; `token` is SQL. */
const auditRowInsert = (table: string, token: string): string =>
  `INSERT INTO ${table} (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms) ` +
  `VALUES (p_key, 'write', UUID(), 'bench:hand', 'row-lock', ${token}, 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 0, 0)`;

/** The audit row into the log, its token still unknown. */
const AUDIT_ROW_FIRST = auditRowInsert('db_lock_log', '0');

/**
 * Runs a design's CREATE … IF NOT EXISTS statements. Workers prepare at once: a create that lost
 * the race (1050 table, 1304 routine: already exists) is fine.
 */
async function createOnce(query: Query, statements: readonly string[]): Promise<void> {
  for (const sql of statements)
    await query(sql).catch((e: { errno?: number }) => (e.errno === 1050 || e.errno === 1304 ? undefined : Promise.reject(e as Error)));
}

/**
 * A design measured, not shipped: the audit row inserted in the transaction BEFORE the locking UPDATE (outside the
 * key's critical section), its token and times filled in by a primary-key UPDATE of columns no
 * index covers just before COMMIT; both halves as CALLs of routines, as the library would send them.
 */
export function rowLockByHandPreAuditDesign(deps: DesignDeps): LockDesign {
  const routines = [
    'CREATE PROCEDURE IF NOT EXISTS bench_pre_take(IN p_key VARBINARY(764)) MODIFIES SQL DATA BEGIN START TRANSACTION; ' +
      AUDIT_ROW_FIRST +
      '; SET @bench_audit = LAST_INSERT_ID(); ' +
      'UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = p_key AND no_lease_holders = 1; ' +
      'SELECT ROW_COUNT() AS taken, LAST_INSERT_ID() AS token; END',
    'CREATE PROCEDURE IF NOT EXISTS bench_pre_commit() MODIFIES SQL DATA BEGIN ' +
      'UPDATE db_lock_log SET fencing_token = LAST_INSERT_ID(), acquired_at = UTC_TIMESTAMP(6), ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = @bench_audit; COMMIT; END',
  ];
  return transactionDesign(deps, 'row-lock-hand-pre-audit', 2 + 2, {
    prepare: async (query: Query, key: string) => {
      await createOnce(query, routines);
      await BY_HAND_TAKE.prepare(query, key);
    },
    take: { openAndTake: async (query: Query, key: string) => tookTheRow(await query('CALL bench_pre_take(?)', [Buffer.from(key)]), key) },
    commitWith: (query) => query('CALL bench_pre_commit()'),
  });
}

/** The audit row's columns, in a table of its own with no index but its primary key. */
const LEAN_AUDIT_TABLE =
  'CREATE TABLE IF NOT EXISTS bench_lean_log (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, lock_key VARBINARY(764) NOT NULL, ' +
  'mode VARCHAR(6) NOT NULL, owner CHAR(36) NOT NULL, holder VARCHAR(255), strategy VARCHAR(16), fencing_token BIGINT UNSIGNED, ' +
  'status VARCHAR(16), lease_ms INT, acquired_at DATETIME(6), expires_at DATETIME(6), ended_at DATETIME(6), wait_ms INT, hold_ms INT) ENGINE=InnoDB';

/**
 * A design measured, not shipped: the by-hand hold with its audit row written into a table whose
 * only index is its primary key, in one CALL with COMMIT as the record-and-commit routine does.
 * The cheapest durable audit row a hold can write inside its transaction: what is left of the
 * audit row's cost once `db_lock_log`'s secondary indexes (which the lease's lock paths read) are
 * not paid.
 */
export function rowLockByHandLeanAuditDesign(deps: DesignDeps): LockDesign {
  const setup = [
    LEAN_AUDIT_TABLE,
    `CREATE PROCEDURE IF NOT EXISTS bench_lean_commit(IN p_key VARBINARY(764)) MODIFIES SQL DATA BEGIN ${auditRowInsert('bench_lean_log', 'LAST_INSERT_ID()')}; COMMIT; END`,
  ];
  return transactionDesign(deps, 'row-lock-hand-lean-audit', 2 + 2, {
    prepare: async (query: Query, key: string) => {
      await createOnce(query, setup);
      await BY_HAND_TAKE.prepare(query, key);
    },
    take: BY_HAND_TAKE.take,
    commitWith: (query, key) => query('CALL bench_lean_commit(?)', [Buffer.from(key)]),
  });
}

export function getLockDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  return {
    id: 'get-lock',
    usefulStatements: 2 + 2, // GET_LOCK, RELEASE_LOCK + critical section
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare() {},
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      for (;;) {
        const rows = await query('SELECT GET_LOCK(?, 60) AS got', [key]);
        if (Number(rows[0]!.got) === 1) break;
      }
      return timedHold(
        () => body(query),
        () => query('SELECT RELEASE_LOCK(?)', [key]),
      );
    },
    roundTrips: () => counter.sent,
    redisCommands: () => 0,
    async close() {},
  };
}
