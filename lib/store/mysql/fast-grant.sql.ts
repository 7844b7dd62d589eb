import type { GrantInput, GrantOutcome } from './grant.sql.js';
import { bound } from './grant-statements.sql.js';
import { decisionUpdate, logRowValues } from './single-key-grant.sql.js';
import { ER_DUP_ENTRY, errnoOf } from './errno.js';
import { bellFreeSql, keyLiteral, LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LOCK_TABLE, newestClaimSql, ourTurnSql, rowsOf } from './sql.js';
import { SESSION_LOCK_WAIT_MS } from './lock-connection-pool.js';
import type { StatementPlan } from './statement-plan.js';

/** A single-row INSERT of NULL into a NOT NULL column fails, in strict mode or not. */
export const ER_BAD_NULL_ERROR = 1048;

/**
 * The single-key grant when nothing says the key is contended: the shape of the durable grant
 * itself and nothing more, START; the deciding UPDATE; INSERT … VALUES; COMMIT.
 *
 * A refusal must not write the log row, and an `INSERT … SELECT … WHERE ROW_COUNT() = 1` costs
 * about a sixth of the grant more than INSERT … VALUES (and takes the table's AUTO-INC lock). So
 * the row is always inserted with VALUES, its token `IF(ROW_COUNT() = 1, LAST_INSERT_ID(), NULL)`:
 * refused, that is NULL into a NOT NULL column, error 1048, and a multi-statement round trip stops
 * at its first error, so COMMIT never runs and the transaction (nothing written) is rolled back.
 * The caller then sends the full plan (singleKeyGrantPlan), which decides again and says why.
 *
 * Only the UPDATE is bounded on the server: it is the one statement that can wait on a row lock
 * (the INSERT has no unique secondary key to wait on under READ COMMITTED). No read-back: the
 * token and the row id come in the OK packets, and the lease end is the server clock's estimate
 * (the row holds the exact value).
 */
export function fastSingleKeyGrantPlan(input: GrantInput, estimatedServerNow: () => number, freeAtToken?: number): StatementPlan<GrantOutcome> {
  const target = input.targets[0]!;
  // A reader must also respect another process's "writer waiting" mark, which only the deciding UPDATE tests.
  const claims = input.claims === true && (target.mode === 'write' || !input.writerPreference);
  if (freeAtToken !== undefined && claims) return claimingGrantPlan(input, estimatedServerNow, freeAtToken + 1);
  const row = logRowValues(input, 'IF(ROW_COUNT() = 1, LAST_INSERT_ID(), NULL)');
  const [decision] = bound(input, [decisionUpdate(input, freeAtToken)]);
  const statements = ['START TRANSACTION', decision!, `INSERT INTO ${LOCK_LOG_TABLE} (${row.columns}) VALUES (${row.values})`, 'COMMIT'];
  return {
    statements,
    parse: (results) => {
      const decided = results[1] as { insertId?: number | string };
      const logged = results[2] as { insertId?: number | string };
      return {
        granted: true,
        rows: [
          {
            id: String(logged.insertId),
            storedKey: target.storedKey,
            fencingToken: Number(decided.insertId),
            expiresAt: new Date(estimatedServerNow() + input.leaseMs),
          },
        ],
        reclaimed: 0,
        serverWaitMs: 0,
      };
    },
  };
}

/**
 * The grant of a key this process knows free at `token - 1` where tokens are claimed
 * (AddTokenClaims): one autocommit INSERT of the log row with the key's next token. Every grant
 * of any strategy claims the key's next token in the log before it lets anyone in (a row-lock take
 * claims one first where a lease held the key last), so a duplicate in the claim index (1062)
 * means someone was granted since: the refusal, nothing written. While another session holds the
 * key's doorbell the token is NULL (1048), as in fastSingleKeyGrantPlan. The key row is not
 * touched: the next grant that reads it hands out a token above the claims (nextTokenSql).
 *
 * Its row is dated when the statement starts: it grants only if nobody claimed a token since our
 * own hold, whose release committed before it was sent, so there is no release it could wait for.
 */
function claimingGrantPlan(input: GrantInput, estimatedServerNow: () => number, token: number): StatementPlan<GrantOutcome> {
  const target = input.targets[0]!;
  // Sent on the pool, never through a bell: nobody may hold the key's bell (see bellFreeSql). No
  // claim read for a bell a stopped waiter outlived (ourTurnSql): a subquery on the INSERT's own
  // table makes the server materialize it on every grant; a refusal goes to the full plan, which reads it.
  const value = input.doorbell ? `IF(${bellFreeSql(input.doorbell)}, ${token}, NULL)` : String(token);
  const row = logRowValues(input, value, 'statement-start');
  const insert = `INSERT INTO ${LOCK_LOG_TABLE} (${row.columns}) VALUES (${row.values})`;
  return {
    // The one wait this INSERT can meet is on the claim index's row locks, which the lock sessions
    // bound to a second (innodb_lock_wait_timeout): a server bound no shorter adds only its cost.
    statements: [input.statementLimit && input.statementLimit.ms < SESSION_LOCK_WAIT_MS ? bound(input, [insert])[0]! : insert],
    parse: (results) => {
      const logged = results[0] as { insertId?: number | string };
      const expiresAt = new Date(estimatedServerNow() + input.leaseMs);
      return {
        granted: true,
        rows: [{ id: String(logged.insertId), storedKey: target.storedKey, fencingToken: token, expiresAt }],
        reclaimed: 0,
        serverWaitMs: 0,
      };
    },
  };
}

/**
 * The grant of a waiter woken by the key's doorbell, where tokens are claimed: one autocommit
 * INSERT of the log row, in the round trip of the wait. The bell rings after the holder's release
 * has committed, so the key's newest claim is then usually that holder's ended row. The INSERT
 * claims the key's next token (above the key row's and that claim) only while the newest claim is
 * an ended exclusive lease hold: such a hold was granted while nobody else held the key, and
 * nothing was granted since, so nobody holds it now. Any other newest claim (a live holder, a
 * reader, a permit, a row-lock's claim, none at all), a missing key row, or another session
 * holding the bell makes the token NULL (1048); a grant that claimed the same token meanwhile makes
 * it a duplicate (1062). Either way nothing is written, the batch stops, and the full plan decides.
 *
 * The newest claim is read in a derived table with LIMIT, which both servers materialize: MySQL
 * refuses a subquery on the INSERT's own table in its VALUES otherwise. The token is read back by
 * the row's id in `readBack`, a select list the caller adds to a statement of its own that follows
 * (the OK packet carries the row's id, not the token).
 */
export function afterBellClaimPlan(input: GrantInput, estimatedServerNow: () => number): StatementPlan<GrantOutcome> & { readonly readBack: string } {
  const target = input.targets[0]!;
  const key = keyLiteral(target.bytes);
  const newest = newestClaimSql(
    key,
    'n',
    `n.token_claim AS claim, n.status NOT IN ${LIVE_STATUSES_SQL} AND n.mode = 'write' AND n.strategy = 'lease' AS ended`,
  );
  const next = `(SELECT IF(d.ended, GREATEST(d.claim, (SELECT k.fencing_token FROM ${LOCK_TABLE} k WHERE k.lock_key = ${key})) + 1, NULL) FROM ${newest} d)`;
  const row = logRowValues(input, input.doorbell ? `IF(${ourTurnSql(input.doorbell)}, ${next}, NULL)` : next);
  const [insert] = bound(input, [`INSERT INTO ${LOCK_LOG_TABLE} (${row.columns}) VALUES (${row.values})`]);
  return {
    statements: [insert!],
    readBack: `(SELECT fencing_token FROM ${LOCK_LOG_TABLE} WHERE id = LAST_INSERT_ID()) AS claimed_token`,
    // results: the INSERT's, then the row of the statement that carried `readBack`.
    parse: (results) => {
      const logged = results[0] as { insertId?: number | string };
      const fencingToken = Number(rowsOf(results[1])[0]?.claimed_token);
      const expiresAt = new Date(estimatedServerNow() + input.leaseMs);
      return {
        granted: true,
        rows: [{ id: String(logged.insertId), storedKey: target.storedKey, fencingToken, expiresAt }],
        reclaimed: 0,
        serverWaitMs: 0,
      };
    },
  };
}

/** The fast grant's refusal (see fastSingleKeyGrantPlan), as the driver reports it. */
export function isFastGrantRefusal(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | null)?.cause ?? error;
  const errno = errnoOf(cause);
  return errno === ER_BAD_NULL_ERROR || errno === ER_DUP_ENTRY;
}
