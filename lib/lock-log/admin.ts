import type { LockHolderInfo, LockInfo } from '../core/lock-handle.js';
import type { LockMode } from '../core/lock-mode.js';
import type { LockStrategyName } from '../core/lock-strategy-name.js';
import { describe } from '../core/option-checks.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import {
  format,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msSince,
  NOW,
  parseDate,
  PROCESS_TABLE,
  rowsOf,
} from '../mysql/sql.js';
import { INTERNAL_KEY_BYTE } from './internal-keys.js';
import type { LockLog } from './lock-log.js';

/**
 * Operator calls: who holds a key, live holders across keys, evict the holders of a key. They
 * read the log rows both strategies write, so they see every holder whatever its strategy.
 * Plain statements on the library's pool; arguments are validated before any SQL.
 */

/** A holder's lease end: its own or its process's latest renewal plus its lease, whichever is later. */
const EFFECTIVE_EXPIRY = `GREATEST(g.expires_at, COALESCE(p.renewed_at + INTERVAL g.lease_ms * 1000 MICROSECOND, g.expires_at))`;

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
  /** Its mode. */
  readonly mode: LockMode;
  /** Acquisition id (log row owner). */
  readonly owner: string;
  /** Process that holds it, host:pid. */
  readonly holder: string;
  /** How it holds the key: 'lease' or 'row-lock'. */
  readonly strategy: LockStrategyName;
  /** The fencing token it was granted for this key. */
  readonly fencingToken: number;
  /** ACQUIRED, or COMPLETED once a fenced transaction committed under it while it stayed held. */
  readonly status: string;
  /** Its lease, in ms. */
  readonly leaseMs: number;
  /** When it was granted (server clock). */
  readonly acquiredAt: Date;
  /** When its lease runs out unless its process renews it. */
  readonly expiresAt: Date;
  /** Held so far, by the server clock, in ms. */
  readonly heldMs: number;
  /** Lease left, by the server clock, in ms. */
  readonly remainingMs: number;
}

/** One page of `listLocks()`. */
export interface LockList {
  /** Live holders on this page, oldest grant first. */
  readonly locks: readonly LockListEntry[];
  /** The server's clock when it answered. */
  readonly serverTime: Date;
  /** Pass as `after` for the next page; null when this was the last one. */
  readonly next: string | null;
}

/** A holder `forceRelease()` evicted. */
export interface ForcedReleaseHolder {
  /** Its acquisition id (the log rows' `owner`). */
  readonly owner: string;
  /** Process that held it, host:pid. */
  readonly holder: string;
  /** Its mode. */
  readonly mode: LockMode;
  /** The fencing token it had been granted. */
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

/** Live (unexpired) holders of one key, the server's clock and the key's fencing counter. */
export async function inspect(log: LockLog, key: string, storedKey: Buffer): Promise<LockInfo> {
  const results = await log.run(
    {
      statements: [
        format(
          `SELECT g.mode, g.owner, g.holder, g.strategy, g.fencing_token, g.acquired_at, ${EFFECTIVE_EXPIRY} AS expires_at ` +
            `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
            `WHERE g.lock_key = ? AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} > ${NOW} ORDER BY g.id`,
          [storedKey],
        ),
        format(`SELECT ${NOW} AS now_at, (SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ?) AS fencing_token`, [storedKey]),
      ],
      parse: (r) => r,
    },
    'admin',
  );
  const holders: LockHolderInfo[] = rowsOf(results[0]).map((row) => ({
    mode: row.mode as LockMode,
    owner: String(row.owner),
    holder: String(row.holder),
    strategy: row.strategy as LockStrategyName,
    fencingToken: Number(row.fencing_token),
    acquiredAt: parseDate(row.acquired_at),
    expiresAt: parseDate(row.expires_at),
  }));
  const meta = rowsOf(results[1])[0] ?? {};
  return {
    key,
    mode: holders.length === 0 ? null : holders.some((h) => h.mode === 'write') ? 'write' : 'read',
    holders,
    expiresAt: holders.length ? new Date(Math.max(...holders.map((h) => h.expiresAt.getTime()))) : null,
    fencingToken: Number(meta.fencing_token ?? 0),
    serverTime: parseDate(meta.now_at),
  };
}

/** Live (unexpired) holders of user keys under `namespace`, by log row id, one page. */
export async function listLocks(log: LockLog, namespace: string, limit: number, after: string): Promise<LockList> {
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
  const rows = rowsOf(results[0]);
  const page = rows.slice(0, limit);
  return {
    locks: page.map((row) => ({
      key: keyText(row.lock_key).slice(namespace ? namespace.length + 1 : 0),
      mode: row.mode as LockMode,
      owner: String(row.owner),
      holder: String(row.holder),
      strategy: row.strategy as LockStrategyName,
      fencingToken: Number(row.fencing_token),
      status: String(row.status),
      leaseMs: Number(row.lease_ms),
      acquiredAt: parseDate(row.acquired_at),
      expiresAt: parseDate(row.expires_at),
      heldMs: Number(row.held_ms),
      remainingMs: Number(row.remaining_ms),
    })),
    serverTime: parseDate(rowsOf(results[1])[0]?.now_at),
    next: rows.length > limit ? String(page[page.length - 1]!.id) : null,
  };
}

/**
 * Ends every live log row of every acquisition holding `key` (all keys of a multi-key lock: it
 * was granted all-or-nothing) with status RELEASED and the reason in `note`, and tells the holders'
 * processes (ended_count). Two round trips: list the holders, then end exactly those rows (a holder
 * that arrived meanwhile is not touched). A row-lock holder's row locks stay with its transaction
 * until it ends (the database gives no safe way to end someone else's transaction); its commit then
 * fails with LockLostError.
 */
export async function forceRelease(log: LockLog, key: Buffer, reason: string): Promise<ForcedReleaseHolder[]> {
  const holders = rowsOf(
    await log.pool.query(
      format(`SELECT owner, holder, mode, fencing_token FROM ${LOCK_LOG_TABLE} WHERE lock_key = ? AND status IN ${LIVE_STATUSES_SQL}`, [key]),
      { purpose: 'admin' },
    ),
  );
  if (holders.length === 0) return [];
  const owners = holders.map((h) => String(h.owner));
  const note = (FORCE_RELEASE_NOTE_PREFIX + reason).slice(0, 255);
  const results = await log.withRetries('admin', () =>
    log.run(
      {
        statements: [
          'START TRANSACTION',
          format(
            `UPDATE ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id SET g.status = '${LockStatus.RELEASED}', g.ended_at = ${NOW}, ` +
              `g.hold_ms = ${msSince('g.acquired_at')}, g.note = ?, p.ended_count = p.ended_count + 1 ` +
              `WHERE g.status IN ${LIVE_STATUSES_SQL} AND g.owner IN (?)`,
            [note, owners],
          ),
          format(`SELECT DISTINCT owner FROM ${LOCK_LOG_TABLE} WHERE owner IN (?) AND status = '${LockStatus.RELEASED}' AND note = ?`, [owners, note]),
          'COMMIT',
        ],
        parse: (r) => r,
      },
      'admin',
    ),
  );
  const ended = new Set(rowsOf(results[2]).map((r) => String(r.owner)));
  return holders
    .filter((h) => ended.has(String(h.owner)))
    .map((h) => ({ owner: String(h.owner), holder: String(h.holder), mode: h.mode as LockMode, fencingToken: Number(h.fencing_token) }));
}
