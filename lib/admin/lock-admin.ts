import mysql from 'mysql2';
import { describe } from '../db-lock.options.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import type { LockMode } from '../lock-mode.js';
import { INTERNAL_KEY_BYTE } from '../storage/internal-keys.js';
import { keyText, type LockStore, parseDate } from '../storage/lock-store.js';
import { LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LockStatus } from '../storage/lock-tables.js';

/**
 * Operator calls: list live holders across keys, evict the holders of a key. Plain statements on
 * the library's pool; arguments are validated before any SQL.
 */
const format = (sql: string, values: unknown[]): string => mysql.format(sql, values as Parameters<typeof mysql.format>[1]);
const NOW = 'UTC_TIMESTAMP(6)';

/** Options of `listLocks()`. */
export interface ListLocksOptions {
  /** Most holders returned, 1 to 10000. Default 100. */
  limit?: number;
  /** `next` of the previous page: continue after it. Default: from the start. */
  after?: string;
}

/** One live holder of one key, as `listLocks()` reports it. Times are the database server's (UTC). */
export interface LockListEntry {
  /** Key as written by callers of this service (namespace removed). */
  readonly key: string;
  readonly mode: LockMode;
  /** Acquisition token (log row owner). */
  readonly owner: string;
  /** Process that holds it, host:pid. */
  readonly holder: string;
  readonly fencingToken: number;
  /** ACQUIRED, or COMPLETED once its fenced transaction committed. */
  readonly status: string;
  readonly leaseMs: number;
  readonly acquiredAt: Date;
  readonly expiresAt: Date;
  /** Held so far, by the server clock, in ms. */
  readonly heldMs: number;
  /** Lease left, by the server clock, in ms. */
  readonly remainingMs: number;
}

/** One page of `listLocks()`. */
export interface LockList {
  readonly locks: readonly LockListEntry[];
  /** The server's clock when it answered. */
  readonly serverTime: Date;
  /** Pass as `after` for the next page; null when this was the last one. */
  readonly next: string | null;
}

/** A holder `forceRelease()` evicted. */
export interface ForcedReleaseHolder {
  readonly owner: string;
  readonly holder: string;
  readonly mode: LockMode;
  readonly fencingToken: number;
}

export const MAX_LIST_LIMIT = 10_000;
export const MAX_REASON_LENGTH = 200;
/** Prefix of the note written on force-released log rows. */
export const FORCE_RELEASE_NOTE_PREFIX = 'force-released: ';

export function checkListOptions(options: unknown): { limit: number; after: string } {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options))
    throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`], 'listLocks() options');
  const input = options as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(input)) if (key !== 'limit' && key !== 'after') problems.push(`unknown option '${key}'`);
  const limit = input.limit ?? 100;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
    problems.push(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${describe(limit)}`);
  const after = input.after ?? '0';
  if (typeof after !== 'string' || !/^\d{1,20}$/.test(after))
    problems.push(`after must be the 'next' string of a previous page, got ${describe(after)}`);
  if (problems.length > 0) throw new DbLockOptionsError(problems, 'listLocks() options');
  return { limit: limit as number, after: after as string };
}

export function checkReason(reason: unknown): string {
  if (typeof reason !== 'string' || reason.trim().length === 0 || reason.length > MAX_REASON_LENGTH || !reason.isWellFormed())
    throw new DbLockOptionsError(
      [`reason must be a non-empty string of at most ${MAX_REASON_LENGTH} characters, got ${describe(reason)}`],
      'forceRelease() arguments',
    );
  return reason;
}

/** Live (unexpired) holders of user keys under `namespace`, by log row id, one page. */
export async function listLocks(store: LockStore, namespace: string, limit: number, after: string): Promise<LockList> {
  const prefix = namespace ? Buffer.from(`${namespace}:`, 'utf8') : Buffer.alloc(0);
  const sql = [
    format(
      `SELECT id, lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ` +
        `TIMESTAMPDIFF(MICROSECOND, acquired_at, ${NOW}) DIV 1000 AS held_ms, TIMESTAMPDIFF(MICROSECOND, ${NOW}, expires_at) DIV 1000 AS remaining_ms ` +
        `FROM ${LOCK_LOG_TABLE} WHERE status IN ${LIVE_STATUSES_SQL} AND expires_at > ${NOW} AND lock_key < ? ` +
        (prefix.length > 0 ? `AND LEFT(lock_key, ?) = ? ` : '') +
        `AND id > ? ORDER BY id LIMIT ?`,
      [Buffer.from([INTERNAL_KEY_BYTE]), ...(prefix.length > 0 ? [prefix.length, prefix] : []), after, limit + 1],
    ),
    `SELECT ${NOW} AS now_at`,
  ].join(';\n');
  const results = await store.pool.query<unknown[][]>(sql);
  const rows = results[0] as Record<string, unknown>[];
  const page = rows.slice(0, limit);
  return {
    locks: page.map((row) => ({
      key: keyText(row.lock_key).slice(namespace ? namespace.length + 1 : 0),
      mode: row.mode as LockMode,
      owner: String(row.owner),
      holder: String(row.holder),
      fencingToken: Number(row.fencing_token),
      status: String(row.status),
      leaseMs: Number(row.lease_ms),
      acquiredAt: parseDate(row.acquired_at),
      expiresAt: parseDate(row.expires_at),
      heldMs: Number(row.held_ms),
      remainingMs: Number(row.remaining_ms),
    })),
    serverTime: parseDate((results[1] as Record<string, unknown>[])[0]!.now_at),
    next: rows.length > limit ? String(page[page.length - 1]!.id) : null,
  };
}

/**
 * Ends every live log row of every acquisition holding `key` (all keys of a multi-key lock:
 * it was granted all-or-nothing) with status RELEASED and the reason in `note`. Two round trips:
 * list the holders, then end exactly those (a holder that arrived meanwhile is not touched).
 */
export async function forceRelease(store: LockStore, key: Buffer, reason: string): Promise<ForcedReleaseHolder[]> {
  const holders = await store.pool.query<Record<string, unknown>[]>(
    format(`SELECT owner, holder, mode, fencing_token FROM ${LOCK_LOG_TABLE} WHERE lock_key = ? AND status IN ${LIVE_STATUSES_SQL}`, [key]),
  );
  if (holders.length === 0) return [];
  const owners = holders.map((h) => String(h.owner));
  const note = (FORCE_RELEASE_NOTE_PREFIX + reason).slice(0, 255);
  const results = await store.withRetries(() =>
    store.pool.query<unknown[][]>(
      [
        format(
          `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, ` +
            `hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, ${NOW}) DIV 1000, note = ? WHERE owner IN (?) AND status IN ${LIVE_STATUSES_SQL}`,
          [note, owners],
        ),
        format(`SELECT DISTINCT owner FROM ${LOCK_LOG_TABLE} WHERE owner IN (?) AND status = '${LockStatus.RELEASED}' AND note = ?`, [owners, note]),
      ].join(';\n'),
    ),
  );
  const ended = new Set((results[1] as Record<string, unknown>[]).map((r) => String(r.owner)));
  return holders
    .filter((h) => ended.has(String(h.owner)))
    .map((h) => ({ owner: String(h.owner), holder: String(h.holder), mode: h.mode as LockMode, fencingToken: Number(h.fencing_token) }));
}
