import type { LockInfo } from '../../core/lock-handle.js';
import { lockInfoOf, lockListOf } from '../admin-rows.js';
import type { LockMode } from '../../core/lock-mode.js';
import type { ForcedReleaseHolder, LockList } from '../admin.js';
import type { AdminStore } from '../lock-store.js';
import type { PgLockLog } from './pg-lock-log.js';
import {
  EFFECTIVE_EXPIRY,
  endHoldersCtes,
  FIRST_INTERNAL_KEY,
  keyLiteral,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msSince,
  NOW,
  parseDate,
  PROCESS_TABLE,
  rowIdLiteral,
  sqlInteger,
} from './pg-sql.js';

type Row = Record<string, unknown>;

/** The admin reads on PostgreSQL (see AdminStore and the MySQL store's admin.sql.ts): plain statements on the library's pool. */
export function pgAdmin(log: PgLockLog): AdminStore {
  const send = (sql: string) => log.withRetries(() => log.pool.query(sql, 'admin'));
  return {
    /** Live (unexpired) holders of one key, the server's clock and the key's fencing counter. */
    async inspect(key: string, storedKey: Buffer): Promise<LockInfo> {
      const k = keyLiteral(storedKey);
      const [found, meta] = await send(
        `SELECT g.mode, g.owner, g.holder, g.strategy, g.fencing_token, g.acquired_at, ${EFFECTIVE_EXPIRY} AS expires_at ` +
          `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
          `WHERE g.lock_key = ${k} AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW} ORDER BY g.id;\n` +
          // A key row the janitor reaped (an idle key): the key's newest token in the log, while its rows are kept.
          `SELECT ${NOW} AS now_at, COALESCE((SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ${k}), ` +
          `(SELECT max(fencing_token) FROM ${LOCK_LOG_TABLE} WHERE lock_key = ${k})) AS fencing_token`,
      );
      const info = (meta!.rows[0] ?? {}) as Row;
      return lockInfoOf(key, found!.rows as Row[], info.fencing_token, parseDate(info.now_at), parseDate);
    },

    /** Live (unexpired) holders of user keys under `namespace`, by log row id, one page. */
    async listLocks(namespace: string, limit: number, after: string): Promise<LockList> {
      const prefix = namespace ? Buffer.from(`${namespace}:`, 'utf8') : Buffer.alloc(0);
      const [found, clock] = await send(
        `SELECT g.id, g.lock_key, g.mode, g.owner, g.holder, g.strategy, g.fencing_token, g.status, g.lease_ms, g.acquired_at, ` +
          `${EFFECTIVE_EXPIRY} AS expires_at, ${msSince('g.acquired_at')} AS held_ms, ` +
          `floor(extract(epoch FROM (${EFFECTIVE_EXPIRY} - ${NOW})) * 1000)::bigint AS remaining_ms ` +
          `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
          `WHERE g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW} AND g.lock_key < ${FIRST_INTERNAL_KEY} ` +
          (prefix.length > 0 ? `AND substring(g.lock_key FROM 1 FOR ${prefix.length}) = ${keyLiteral(prefix)} ` : '') +
          `AND g.id > ${rowIdLiteral(after)} ORDER BY g.id LIMIT ${sqlInteger(limit + 1)};\n` +
          `SELECT ${NOW} AS now_at`,
      );
      return lockListOf(found!.rows as Row[], limit, namespace, parseDate((clock!.rows[0] as Row | undefined)?.now_at), parseDate);
    },

    /**
     * Ends every live (unexpired) log row of every acquisition holding `key` as RELEASED with the
     * reason, and tells the holders' processes: in one statement, the holders' rows locked first,
     * so a concurrent forced release waits and finds nothing left (each eviction reported once).
     * A row-lock holder's row lock stays with its transaction until it ends.
     */
    async forceRelease(key: Buffer, fullNote: string): Promise<ForcedReleaseHolder[]> {
      const k = keyLiteral(key);
      const [evicted] = await send(
        `WITH holders AS (SELECT DISTINCT g.owner FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
          `WHERE g.lock_key = ${k} AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW}), ` +
          `due AS (SELECT g.id FROM ${LOCK_LOG_TABLE} g JOIN holders h ON h.owner = g.owner WHERE g.status IN ${LIVE_STATUSES_SQL}), ` +
          `${endHoldersCtes(LockStatus.RELEASED, fullNote.slice(0, 255))} ` +
          `SELECT owner, holder, mode, fencing_token FROM ended WHERE lock_key = ${k}`,
      );
      return (evicted!.rows as Row[]).map((h) => ({
        owner: String(h.owner),
        holder: String(h.holder),
        mode: h.mode as LockMode,
        fencingToken: Number(h.fencing_token),
      }));
    },
  };
}
