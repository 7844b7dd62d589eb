import type pg from 'pg';
import type { KeyGroup } from '../key-groups.js';
import { advisoryKey, keyList, keyLiteral, keyText, LOCK_TABLE, NOW } from './pg-sql.js';

/**
 * The row-lock's statements on PostgreSQL, sent on the business transaction's own connection. The
 * lock is the key's row of db_lock: writers update it (bumping its token, which RETURNING answers),
 * readers lock it FOR SHARE. A key whose row says a lease holder may be live, or that has no row
 * yet, is not taken here: the caller goes on to the rare path.
 */

/** A custom setting holding the session's lock_timeout while a take runs under its own. */
const SAVED_LOCK_TIMEOUT = 'nestjs_db_lock.saved_lock_timeout';

/** The bound's opening, as SELECT items: the transaction's lock_timeout saved, then `ms` set for what follows. */
const saveAndSet = (ms: number): string =>
  `set_config('${SAVED_LOCK_TIMEOUT}', current_setting('lock_timeout'), true), set_config('lock_timeout', '${ms}ms', true)`;

/** The bound's end, as a SELECT item: the saved lock_timeout put back. */
const RESTORE = `set_config('lock_timeout', current_setting('${SAVED_LOCK_TIMEOUT}'), true)`;

/** The bound's end as a statement of its own (see takeGroupStatement's restoreOwed). */
export const RESTORE_LOCK_TIMEOUT = `SELECT ${RESTORE}`;

/**
 * Statements bounded by what is left of the caller's budget: `lock_timeout` (milliseconds, so
 * sub-second budgets hold) for them only, the transaction's own value saved and put back after,
 * so the work inside the hold keeps the app's. A single try (no budget) uses NOWAIT instead (see
 * lockRows); Infinity the session's own setting.
 */
export function bounded(statements: string[], waitMs: number): { sql: string; offset: number } {
  if (waitMs === Infinity || waitMs <= 0) return { sql: statements.join(';\n'), offset: 0 };
  return { sql: [`SELECT ${saveAndSet(boundMs(waitMs))}`, ...statements, RESTORE_LOCK_TIMEOUT].join(';\n'), offset: 1 };
}

const boundMs = (waitMs: number): number => Math.max(1, Math.ceil(waitMs));

/**
 * The keys' queue, ahead of their rows: a transaction-level advisory lock per key (a 64-bit hash of
 * it), exclusive for writers, shared for readers, taken in hash order (one order for everyone, so
 * these never deadlock). PostgreSQL grants a new FOR SHARE beside other sharers even while a
 * FOR UPDATE waits, so readers could keep a writer out for ever; its lock manager queues a shared
 * advisory lock behind a waiting exclusive one, first come first served. The rows' locks still
 * decide (exact keys: a hash collision costs a wait, never a wrong grant). A single try bounds the
 * queue's wait to 1 ms (advisory locks have no NOWAIT), then answers busy (55P03).
 */
export function queueStatements(group: KeyGroup, waitMs: number): string[] {
  const fn = queueFunction(group);
  const hashes = queueHashes(group);
  const queue =
    hashes.length === 1
      ? `SELECT ${fn}(${hashes[0]})`
      : `SELECT count(${fn}(h)) FROM (SELECT h FROM unnest(ARRAY[${hashes.join(', ')}]::bigint[]) AS u(h) ORDER BY h) AS q`;
  if (waitMs > 0) return [queue];
  return [`SELECT ${saveAndSet(1)}`, queue, RESTORE_LOCK_TIMEOUT];
}

const queueFunction = (group: KeyGroup): string => (group.mode === 'write' ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared');

/** The group's queue keys, in the one order everyone takes them. */
const queueHashes = (group: KeyGroup): string[] => [...new Set(group.stored.map(queueKey))].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));

/** A key's queue lock (see queueStatements): 64 bits of a hash of the stored key, in a namespace of the library's own. */
export function queueKey(storedKey: string): string {
  return advisoryKey('row', storedKey);
}

/** The rows' locks in key order (rows are locked in output order): FOR UPDATE / FOR SHARE, NOWAIT for a single try. */
export function lockRowsStatement(group: KeyGroup, waitMs: number): string {
  const clause = group.mode === 'write' ? 'FOR UPDATE' : 'FOR SHARE';
  return (
    `SELECT lock_key, fencing_token, no_lease_holders FROM ${LOCK_TABLE} WHERE lock_key IN (${keyList(group.keys)}) ` +
    `ORDER BY lock_key ${clause}${waitMs <= 0 ? ' NOWAIT' : ''}`
  );
}

/** The writers' UPDATE: each token bumped and the grant stamped; `checked`: the log was read, the rows are taken whatever they say. */
export function bumpStatement(keys: readonly Buffer[], checked = false): string {
  const where = keys.length === 1 ? `lock_key = ${keyLiteral(keys[0]!)}` : `lock_key IN (${keyList(keys)})`;
  return (
    `UPDATE ${LOCK_TABLE} SET fencing_token = fencing_token + 1, last_granted_at = ${NOW}${checked ? ', no_lease_holders = 1' : ''} ` +
    `WHERE ${where}${checked ? '' : ' AND no_lease_holders = 1'} RETURNING lock_key, fencing_token`
  );
}

/** A group's take as one batch: its SQL, the answer that says what was taken, and whether the bound still needs its end. */
export interface GroupTake {
  readonly sql: string;
  readonly result: (results: pg.QueryResult[]) => pg.QueryResult;
  /** The saved lock_timeout was not put back (the answer had no row to put it back with): send RESTORE_LOCK_TIMEOUT before anything else. */
  readonly restoreOwed: (results: pg.QueryResult[]) => boolean;
}

/**
 * One group's take as one round trip, behind the keys' queue (queueStatements): writers lock first where an UPDATE alone would not lock in
 * key order (several keys) or could not refuse at once (a single try), then update; readers lock
 * FOR SHARE. `result` picks the answer that says what was taken.
 *
 * The common take, one key under a budget, sends two statements where the general form sends
 * five (each costs the server a parse and a plan, and the client a result): the bound and the
 * queue lock in one SELECT, whose items run in order; a writer's UPDATE puts the saved
 * lock_timeout back in its RETURNING, which runs once the row is locked and bumped. An UPDATE
 * that finds no row to bump (a rare-path key) puts nothing back: `restoreOwed` says so.
 */
export function takeGroupStatement(group: KeyGroup, waitMs: number): GroupTake {
  const oneBump = group.mode === 'write' && group.keys.length === 1 && waitMs > 0;
  const body =
    group.mode === 'read'
      ? [lockRowsStatement(group, waitMs)]
      : oneBump
        ? [bumpStatement(group.keys)]
        : [lockRowsStatement(group, waitMs), bumpStatement(group.keys)];
  const hashes = queueHashes(group);
  if (hashes.length === 1 && waitMs > 0 && waitMs !== Infinity) {
    const head = `SELECT ${saveAndSet(boundMs(waitMs))}, ${queueFunction(group)}(${hashes[0]})`;
    if (oneBump) {
      const bumpAndRestore = `${body[0]!}, ${RESTORE} AS lock_timeout_restored`;
      return { sql: `${head};\n${bumpAndRestore}`, result: (results) => results[1]!, restoreOwed: (results) => results[1]!.rows.length === 0 };
    }
    const statements = [head, ...body, RESTORE_LOCK_TIMEOUT];
    return { sql: statements.join(';\n'), result: (results) => results[statements.length - 2]!, restoreOwed: () => false };
  }
  const statements = [...queueStatements(group, waitMs), ...body];
  const { sql, offset } = bounded(statements, waitMs);
  const at = offset + statements.length - 1;
  return { sql, result: (results) => results[at]!, restoreOwed: () => false };
}

/** Tokens a group's answer took: all its keys, or undefined (a row missing, or a lease holder possibly live). */
export function tokensTaken(group: KeyGroup, result: pg.QueryResult): Map<string, number> | undefined {
  const rows = result.rows as { lock_key: Buffer; fencing_token: string; no_lease_holders?: number }[];
  if (rows.length < group.keys.length) return undefined;
  if (group.mode === 'read' && rows.some((row) => Number(row.no_lease_holders) !== 1)) return undefined;
  return new Map(rows.map((row) => [keyText(row.lock_key), Number(row.fencing_token)]));
}
