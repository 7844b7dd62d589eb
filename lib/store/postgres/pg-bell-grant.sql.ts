import type pg from 'pg';
import type { GrantOutcome } from '../lock-store.js';
import type { PgGrantInput } from './pg-grant.sql.js';
import {
  grantWaitBound,
  keyLiteral,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  NOW,
  parseDate,
  rowIdLiteral,
  sqlInteger,
  textLiteral,
  type Row,
} from './pg-sql.js';

/**
 * The grant of a single-key writer that just got the key's doorbell, in one statement: the key is
 * usually free then (its holder rang after its release committed), so the grant skips the full
 * grant's locking read and its decision (grantBatch). It reads the key's token and looks for live
 * holders in its own snapshot, then bumps the key row only while its token is still the one it
 * read, and inserts the holder's row from the bump.
 *
 * Every grant of the key, of either strategy and any mode, bumps that token in the commit that
 * makes its holder live (a row-lock reader bumps nothing, but keeps the key row locked while it
 * holds, and the UPDATE waits for it). So a holder the snapshot could not see, granted after it was
 * taken, has moved the token: the UPDATE, which waits for the key row's lock and then tests its
 * newest version (READ COMMITTED), finds a token it did not read and writes nothing. A holder the
 * snapshot sees refuses it outright. Any refusal answers no row and writes nothing; the caller then
 * sends the full grant, which says why (busy, expired holders, a missing key row).
 */
export function bellGrantBatch(input: PgGrantInput): { sql: string; parse: (results: pg.QueryResult[]) => GrantOutcome } {
  const { request } = input;
  const target = request.targets[0]!;
  const key = keyLiteral(target.bytes);
  const grant =
    `WITH cur AS (SELECT fencing_token AS t FROM ${LOCK_TABLE} WHERE lock_key = ${key}), ` +
    `b AS (UPDATE ${LOCK_TABLE} l SET fencing_token = l.fencing_token + 1, last_granted_at = ${NOW}, no_lease_holders = 0, writer_waiting_until = NULL ` +
    `FROM cur WHERE l.lock_key = ${key} AND l.fencing_token = cur.t ` +
    `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = ${key} AND g.status IN ${LIVE_STATUSES_SQL}) ` +
    `RETURNING l.lock_key, l.fencing_token, l.last_granted_at AS now) ` +
    `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
    `SELECT lock_key, 'write', ${textLiteral(request.acquisitionId)}, ${textLiteral(input.holder)}, ${rowIdLiteral(input.processId)}, 'lease', fencing_token, ` +
    `'${LockStatus.ACQUIRED}', ${sqlInteger(request.leaseMs)}, now, now + ${sqlInteger(request.leaseMs)} * interval '1 millisecond', ${sqlInteger(request.waitedMs)} ` +
    `FROM b RETURNING id, lock_key, fencing_token, expires_at`;
  // The UPDATE's one possible wait is a row-lock holder's (or another grant's) lock on the key row.
  const statements = ['BEGIN ISOLATION LEVEL READ COMMITTED', ...grantWaitBound(input.waitMs), grant, 'COMMIT'];
  return {
    sql: statements.join(';\n'),
    parse: (results) => {
      const row = results[statements.length - 2]!.rows[0] as Row | undefined;
      if (row === undefined) return { granted: false, reason: 'busy' };
      return {
        granted: true,
        rows: [
          { id: String(row.id), storedKey: keyText(row.lock_key), fencingToken: Number(row.fencing_token), expiresAt: parseDate(row.expires_at) },
        ],
        reclaimed: 0,
        serverWaitMs: 0,
      };
    },
  };
}
