import type { LockInfo } from '../../core/lock-handle.js';
import { lockInfoOf, lockListOf } from '../admin-rows.js';
import type { LockMode } from '../../core/lock-mode.js';
import type { ForcedReleaseHolder, LockList } from '../admin.js';
import type { AdminStore } from '../lock-store.js';
import {
  EFFECTIVE_EXPIRY,
  format,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msSince,
  currentTokenSql,
  NOW,
  parseDate,
  PROCESS_TABLE,
  rowsOf,
  endHoldersStatement,
} from './sql.js';
import { INTERNAL_KEY_BYTE } from '../../core/internal-keys.js';
import type { MysqlLockLog } from './mysql-lock-log.js';

/** The admin reads on MySQL/MariaDB (see AdminStore): plain statements on the library's pool. */
export function mysqlAdmin(log: MysqlLockLog): AdminStore {
  return {
    inspect: (key, storedKey) => inspect(log, key, storedKey),
    listLocks: (namespace, limit, after) => listLocks(log, namespace, limit, after),
    forceRelease: (key, note) => forceRelease(log, key, note),
  };
}

/** Live (unexpired) holders of one key, the server's clock and the key's fencing counter. */
async function inspect(log: MysqlLockLog, key: string, storedKey: Buffer): Promise<LockInfo> {
  const results = await log.run(
    {
      statements: [
        format(
          `SELECT g.mode, g.owner, g.holder, g.strategy, g.fencing_token, g.acquired_at, ${EFFECTIVE_EXPIRY} AS expires_at ` +
            `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
            `WHERE g.lock_key = ? AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW} ORDER BY g.id`,
          [storedKey],
        ),
        // Where tokens are claimed the key row lags behind one-INSERT grants: the counter is the newer of the two.
        // A key row the janitor reaped (an idle key): the key's newest token in the log, as long as its rows are kept.
        format(
          `SELECT ${NOW} AS now_at, COALESCE((SELECT ${currentTokenSql(`${LOCK_TABLE}.lock_key`, log.schema.claims)} FROM ${LOCK_TABLE} WHERE lock_key = ?), ` +
            `(SELECT MAX(fencing_token) FROM ${LOCK_LOG_TABLE} WHERE lock_key = ?)) AS fencing_token`,
          [storedKey, storedKey],
        ),
      ],
      parse: (r) => r,
    },
    'admin',
  );
  const meta = rowsOf(results[1])[0] ?? {};
  return lockInfoOf(key, rowsOf(results[0]), meta.fencing_token, parseDate(meta.now_at), parseDate);
}

/** Live (unexpired) holders of user keys under `namespace`, by log row id, one page. */
async function listLocks(log: MysqlLockLog, namespace: string, limit: number, after: string): Promise<LockList> {
  const prefix = namespace ? Buffer.from(`${namespace}:`, 'utf8') : Buffer.alloc(0);
  const results = await log.run(
    {
      statements: [
        format(
          `SELECT g.id, g.lock_key, g.mode, g.owner, g.holder, g.strategy, g.fencing_token, g.status, g.lease_ms, g.acquired_at, ${EFFECTIVE_EXPIRY} AS expires_at, ` +
            `${msSince('g.acquired_at')} AS held_ms, TIMESTAMPDIFF(MICROSECOND, ${NOW}, ${EFFECTIVE_EXPIRY}) DIV 1000 AS remaining_ms ` +
            `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
            `WHERE g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW} AND g.lock_key < ? ` +
            (prefix.length > 0 ? `AND LEFT(g.lock_key, ?) = ? ` : '') +
            `AND g.id > ? ORDER BY g.id LIMIT ?`,
          [Buffer.from([INTERNAL_KEY_BYTE]), ...(prefix.length > 0 ? [prefix.length, prefix] : []), after, limit + 1],
        ),
        `SELECT ${NOW} AS now_at`,
      ],
      parse: (r) => r,
    },
    'admin',
  );
  return lockListOf(rowsOf(results[0]), limit, namespace, parseDate(rowsOf(results[1])[0]?.now_at), parseDate);
}

/**
 * Ends every live (unexpired) log row of every acquisition holding `key` (all keys of a multi-key
 * lock: it was granted all-or-nothing) with status RELEASED and the reason in `note`, and tells the
 * holders' processes (ended_count). One transaction on one connection: the key's holders are read
 * with their rows locked, then exactly those are ended, so a concurrent forced release waits and
 * finds nothing left to evict (each eviction is reported once), and a holder that arrives
 * afterwards is not touched. A holder whose lease already ran out is not evicted: the key is free,
 * and its row ends EXPIRED with the next takeover or the janitor. A row-lock holder's row locks stay
 * with its transaction until it ends (the database gives no safe way to end someone else's
 * transaction); its commit then fails with LockLostError.
 */
function forceRelease(log: MysqlLockLog, key: Buffer, fullNote: string): Promise<ForcedReleaseHolder[]> {
  const note = fullNote.slice(0, 255);
  return log.withRetries('admin', () =>
    log.pool.session({ purpose: 'admin' }, async (session) => {
      await session.query('START TRANSACTION');
      const holders = rowsOf(
        await session.query(
          format(
            `SELECT g.owner, g.holder, g.mode, g.fencing_token FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
              `WHERE g.lock_key = ? AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW} FOR UPDATE`,
            [key],
          ),
        ),
      );
      if (holders.length > 0) {
        const owners = [...new Set(holders.map((h) => String(h.owner)))];
        await session.query(format(endHoldersStatement(LockStatus.RELEASED, `g.status IN ${LIVE_STATUSES_SQL} AND g.owner IN (?)`), [note, owners]));
      }
      await session.query('COMMIT');
      return holders.map((h) => ({
        owner: String(h.owner),
        holder: String(h.holder),
        mode: h.mode as LockMode,
        fencingToken: Number(h.fencing_token),
      }));
    }),
  );
}
