import type pg from 'pg';
import type { GrantOutcome } from '../lock-store.js';
import type { PgGrantInput } from './pg-grant.sql.js';
import { tokenGuardedGrant } from './pg-known-free-grant.sql.js';
import { keyLiteral, LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LOCK_TABLE } from './pg-sql.js';

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
  const key = keyLiteral(input.request.targets[0]!.bytes);
  return tokenGuardedGrant(input, {
    ctes: `cur AS (SELECT fencing_token AS t FROM ${LOCK_TABLE} WHERE lock_key = ${key}), `,
    from: 'FROM cur ',
    token: 'cur.t',
    condition: ` AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = ${key} AND g.status IN ${LIVE_STATUSES_SQL})`,
  });
}
