import type { LockTarget } from '../../core/lock-key.js';
import type { RowLockAuditRow } from '../lock-store.js';
import { conflictingHolders } from './grant-statements.sql.js';
import type { ServerFlavor } from './server-flavor.js';
import { takeWriteKeysWhere } from './take-write-keys.sql.js';
import {
  EFFECTIVE_EXPIRY,
  format,
  keyLiteral,
  keyText,
  rowsOf,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  NOW,
  endHoldersStatement,
  newestClaimSql,
  nextTokenSql,
  sqlInteger,
} from './sql.js';

/**
 * The row-lock's statements, all sent on the business transaction's own connection. The lock is
 * an InnoDB lock on the key's row of db_lock, the very row every lease grant locks before it
 * decides: a row-lock holder therefore keeps lease grants of its key waiting for as long as its
 * transaction is open, and the strategies exclude each other with no log row committed first.
 *
 * Whether a lease holder of the key may be live is written on the key row itself
 * (`no_lease_holders`: every lease grant sets 0 in its commit, a row-lock writer that checked the
 * log sets 1), and the locking statement reads it from the row it locks, the row's latest
 * committed version whatever the isolation level. So a key row-locks alone takes one statement
 * that never reads the log; a key a lease used since takes the rare path (takeKeysChecked).
 */

/** Waiting bound of one locking statement: 0 one try, Infinity the session's own innodb_lock_wait_timeout. */
export type WaitBound = number;

/**
 * Writers: one UPDATE locks the key rows, bumps each token and stamps the grant, where no lease
 * holder can be live. For a single key `LAST_INSERT_ID(token + 1)` returns the new token in the OK
 * packet (no read-back). Affected rows fewer than the keys: a row is missing or the log must be read.
 * `checked`: the log was read with the rows locked, so the rows are taken whatever they say, and
 * the one-statement path opens again for the next holder.
 */
export function takeWriteKeys(keys: readonly Buffer[], checked = false): string {
  return takeWriteKeysWhere(format('lock_key IN (?)', [keys]), keys.length === 1, checked);
}

/**
 * The checked writers' UPDATE where tokens are claimed (AddTokenClaims): each key's token is the
 * one this take claimed for it (`claimed`: stored key → token; read from the claim's round trip, so
 * that no subquery on the log runs in the business transaction), above the row's.
 */
export function takeClaimedWriteKeys(keys: readonly Buffer[], stored: readonly string[], claimed: ReadonlyMap<string, number>): string {
  const claim = `CASE lock_key ${keys.map((key, i) => `WHEN ${keyLiteral(key)} THEN ${sqlInteger(claimed.get(stored[i]!) ?? 0)}`).join(' ')} ELSE 0 END`;
  // The claim is the writer's own token: tokens stay consecutive where nothing else happened.
  const next = `GREATEST(fencing_token + 1, ${claim})`;
  return (
    `UPDATE ${LOCK_TABLE} SET fencing_token = ${keys.length === 1 ? `LAST_INSERT_ID(${next})` : next}, last_granted_at = ${NOW}, no_lease_holders = 1 ` +
    format('WHERE lock_key IN (?)', [keys])
  );
}

/**
 * A row-lock take's claims (AddTokenClaims), sent on the library's pool after it ended expired
 * lease holders and before it counts the live ones, in the same round trip: one CLAIMED row per
 * key with the key's next token, so that a lease grant that knows the key free (one INSERT of the
 * same token) is refused from now on; then, per key, the token claimed and whether the key needed
 * a claim (see leaseHoldersOf). A duplicate means a lease grant claimed that token first: sent
 * again. No claim while a conflicting lease holder is live (the take is refused then, and a waiter
 * polling a held key must not write a row per try).
 * Only keys with a claim row: a one-INSERT grant needs a key its process knows free, which it knows
 * only for a while after its own grant's claim row ended, and the janitor keeps claim rows longer
 * (CLAIMS_KEPT_MS); without one, every later lease grant decides on the key row this take holds
 * locked. So a key only row-locks ever used writes no claim rows.
 */
export function claimTokens(targets: readonly LockTarget[], acquisitionId: string, holder: string): string[] {
  const keys = targets.map((t) => t.bytes);
  const conflict = conflictingHolders(targets);
  return [
    format(
      `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note) ` +
        `SELECT k.lock_key, 'write', ?, ?, 'row-lock', ${nextTokenSql('k.lock_key', true, 'k.fencing_token')}, '${LockStatus.CLAIMED}', 0, ${NOW}, ${NOW}, ${NOW}, 0, 0, ` +
        `'claimed before a row-lock take' FROM ${LOCK_TABLE} k WHERE k.lock_key IN (?) AND ${newestClaimSql('k.lock_key', 'e')} IS NOT NULL ` +
        `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE (${conflict.sql}) AND g.status IN ${LIVE_STATUSES_SQL}) ` +
        // Sent again after a duplicate: a new claim only where someone claimed since ours.
        `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} o WHERE o.lock_key = k.lock_key AND o.owner = ? AND o.status = '${LockStatus.CLAIMED}' ` +
        `AND o.token_claim = ${newestClaimSql('k.lock_key', 'n')})`,
      [acquisitionId, holder, keys, ...conflict.values, acquisitionId],
    ),
    // Per key: the token claimed, and whether the key needed a claim at all (it has claim rows).
    format(
      `SELECT k.lock_key, (SELECT MAX(o.fencing_token) FROM ${LOCK_LOG_TABLE} o WHERE o.lock_key = k.lock_key AND o.status = '${LockStatus.CLAIMED}' AND o.owner = ?) AS token, ` +
        `${newestClaimSql('k.lock_key', 'e')} IS NOT NULL AS needs_claim FROM ${LOCK_TABLE} k WHERE k.lock_key IN (?)`,
      [acquisitionId, keys],
    ),
  ];
}

/**
 * Readers share the key, so they cannot bump a token (that needs an exclusive lock): a shared
 * lock on the rows, and each reader's token is the key's current one, the token of the last
 * writer it reads after. The same read is the rare path's locking read for both modes.
 */
export function lockKeyRows(keys: readonly Buffer[], mode: LockTarget['mode'], flavor: ServerFlavor, hint = ''): string {
  const clause = mode === 'write' ? 'FOR UPDATE' : flavor.sharedLockClause;
  return format(`SELECT ${hint}lock_key, fencing_token, no_lease_holders FROM ${LOCK_TABLE} WHERE lock_key IN (?) ORDER BY lock_key ${clause}`, [
    keys,
  ]);
}

/** Tokens of write keys taken by a multi-key UPDATE (our own uncommitted values). */
export function readTokens(keys: readonly Buffer[]): string {
  return format(`SELECT lock_key, fencing_token FROM ${LOCK_TABLE} WHERE lock_key IN (?)`, [keys]);
}

/**
 * Rare path, sent on the library's pool (a fresh read in its own autocommit transaction) while the
 * caller's transaction holds the key rows: lease holders of the keys whose lease (own or process)
 * ran out are ended EXPIRED and their processes told (ended_count), as a lease takeover does, so
 * their fences refuse; then the live ones the caller conflicts with are counted
 * (`conflictingHolders`). No lease grant of these keys can commit in between: it would need the
 * rows the caller holds, or (the one-INSERT grant) the token the `claims` sent in between took.
 */
export function leaseHoldersCheck(targets: readonly LockTarget[], acquisitionId: string, claims: readonly string[] = []): string {
  const conflict = conflictingHolders(targets);
  const conflicting = `(${conflict.sql}) AND g.status IN ${LIVE_STATUSES_SQL}`;
  return [
    format(endHoldersStatement(LockStatus.EXPIRED, `${conflicting} AND ${EFFECTIVE_EXPIRY} <= ${NOW}`), [
      `taken over by row-lock ${acquisitionId}`,
      ...conflict.values,
    ]),
    ...claims,
    format(`SELECT COUNT(*) AS live FROM ${LOCK_LOG_TABLE} g WHERE ${conflicting}`, conflict.values),
  ].join(';\n');
}

/**
 * What `leaseHoldersCheck` found: the live conflicting holders (its last statement), and the tokens
 * claimed when `claimed`. A key that needed a claim and got none (a holder was live then, and may
 * have let go since) counts as a live holder: the take must not go on without it, or that holder's
 * process could grant itself the next token beside it.
 */
export function leaseHoldersOf(results: readonly unknown[], claimed: boolean): { live: number; claimed?: ReadonlyMap<string, number> } {
  const live = Number(rowsOf(results[results.length - 1])[0]?.live ?? 0);
  if (!claimed) return { live };
  const tokens = new Map<string, number>();
  let unclaimed = 0;
  // The claims' read (the last of claimTokens) comes right before the count.
  for (const row of rowsOf(results[results.length - 2])) {
    if (row.token !== null && row.token !== undefined) tokens.set(keyText(row.lock_key), Number(row.token));
    else if (Number(row.needs_claim) === 1) unclaimed++;
  }
  return unclaimed > 0 ? { live: live + unclaimed } : { live, claimed: tokens };
}

/**
 * A locking statement bounded by what is left of the caller's budget, on the server (never by
 * killing a thread id, which behind a proxy may be someone else's). MariaDB bounds any statement
 * (`SET STATEMENT`, fractional seconds, so sub-second budgets hold; a zero lock wait for one try).
 * MySQL bounds only a read (NOWAIT, `MAX_EXECUTION_TIME`), so a writer first waits in the bounded
 * locking read (`lockKeyRowsBounded`) and its UPDATE then finds the rows already locked.
 */
function boundOnMariadb(statement: string, waitMs: WaitBound): string {
  if (waitMs <= 0) return `SET STATEMENT innodb_lock_wait_timeout = 0 FOR ${statement}`;
  return `SET STATEMENT max_statement_time = ${(Math.max(1, Math.ceil(waitMs)) / 1000).toFixed(3)} FOR ${statement}`;
}

/** The rows' locking read (`lockKeyRows`), bounded: one statement on both servers. */
export function lockKeyRowsBounded(keys: readonly Buffer[], mode: LockTarget['mode'], flavor: ServerFlavor, waitMs: WaitBound): string {
  if (waitMs === Infinity) return lockKeyRows(keys, mode, flavor);
  if (flavor.statementTimeLimit) return boundOnMariadb(lockKeyRows(keys, mode, flavor), waitMs);
  return waitMs <= 0
    ? `${lockKeyRows(keys, mode, flavor)} NOWAIT`
    : lockKeyRows(keys, mode, flavor, `/*+ MAX_EXECUTION_TIME(${Math.max(1, Math.ceil(waitMs))}) */ `);
}

/** The writers' UPDATE (`takeWriteKeys`), bounded: in the statement on MariaDB; on MySQL the bounded locking read goes first. */
export function takeWriteKeysBounded(keys: readonly Buffer[], flavor: ServerFlavor, waitMs: WaitBound): { lockFirst?: string; update: string } {
  const update = takeWriteKeys(keys);
  if (waitMs === Infinity) return { update };
  if (flavor.statementTimeLimit) return { update: boundOnMariadb(update, waitMs) };
  return { lockFirst: lockKeyRowsBounded(keys, 'write', flavor, waitMs), update };
}

/**
 * A statement that waits for the rows' locks (the begin-and-take routine's CALL), bounded in
 * itself where the server can (MariaDB). Undefined on MySQL with a finite wait: only a locking read
 * can be bounded there, so the bounded read must go first, in an open transaction.
 */
export function boundedInStatement(statement: string, flavor: ServerFlavor, waitMs: WaitBound): string | undefined {
  if (waitMs === Infinity) return statement;
  return flavor.statementTimeLimit ? boundOnMariadb(statement, waitMs) : undefined;
}

/**
 * The audit rows, terminal as written (a row-lock hold has no lease and no live log row): in the
 * commit that ends the hold (RELEASED, atomically with the work), or after a rollback (FAILED,
 * EXPIRED) on the library's pool. ended_at is the server's clock at the insert.
 */
export function insertAuditRows(rows: readonly RowLockAuditRow[], holder: string): string {
  const values = rows.map((r) =>
    format(
      `(?, ?, ?, ?, 'row-lock', ${sqlInteger(r.fencingToken)}, ?, 0, ${NOW} - INTERVAL ${sqlInteger(r.holdMs * 1000)} MICROSECOND, ${NOW}, ${NOW}, ` +
        `${sqlInteger(r.waitedMs)}, ${sqlInteger(r.holdMs)}, ?)`,
      [r.key, r.mode, r.owner, holder, r.status, r.note],
    ),
  );
  return (
    `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note) ` +
    `VALUES ${values.join(', ')}`
  );
}
