import type pg from 'pg';
import type { GrantOutcome } from '../lock-store.js';
import type { PgGrantInput } from './pg-grant.sql.js';
import {
  keyLiteral,
  keyText,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  grantWaitBound,
  NOW,
  parseDate,
  rowIdLiteral,
  sqlInteger,
  textLiteral,
  type Row,
} from './pg-sql.js';

/**
 * The grant of a key this process knows free at `token` (see KnownFreeKeys): one statement that
 * bumps the key row's token only while it is still `token`, and inserts the holder's log row from
 * what the bump returned. It skips what the full grant (grantBatch) spends most on: the key rows'
 * locking read, the count of live holders, the writer marks and the reading of its own decision.
 *
 * Nobody was granted the key since our release when its token has not moved, since every grant of
 * either strategy bumps it (a row-lock reader bumps nothing, but keeps the row locked while it
 * holds, and the UPDATE waits for it; under READ COMMITTED the UPDATE then tests the row's newest
 * version). With a doorbell, a session holding or queued for the bell refuses it too (its shared
 * try fails), as the full grant's turn check does. Any refusal writes nothing and answers no row:
 * the caller forgets the key and sends the full grant, which says why.
 */
export function knownFreeGrantBatch(input: PgGrantInput, token: number): { sql: string; parse: (results: pg.QueryResult[]) => GrantOutcome } {
  const turn = input.turn === undefined ? '' : ` AND pg_try_advisory_xact_lock_shared(${input.turn})`;
  return tokenGuardedGrant(input, { token: sqlInteger(token), condition: turn });
}

/**
 * A single-key writer's grant in one statement: the key row bumped only while its token is
 * `guard.token` (and `guard.condition` holds), the holder's row inserted from the bump, in one
 * READ COMMITTED transaction; no row when refused. `guard.ctes` and `guard.from` bring in what the
 * token is read from (see bellGrantBatch).
 */
export function tokenGuardedGrant(
  input: PgGrantInput,
  guard: { token: string; condition: string; ctes?: string; from?: string },
): { sql: string; parse: (results: pg.QueryResult[]) => GrantOutcome } {
  const { request } = input;
  const target = request.targets[0]!;
  const grant =
    `WITH ${guard.ctes ?? ''}b AS (UPDATE ${LOCK_TABLE} l SET fencing_token = l.fencing_token + 1, last_granted_at = ${NOW}, no_lease_holders = 0, writer_waiting_until = NULL ` +
    `${guard.from ?? ''}WHERE l.lock_key = ${keyLiteral(target.bytes)} AND l.fencing_token = ${guard.token}${guard.condition} ` +
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
