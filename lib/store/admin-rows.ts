import type { LockHolderInfo, LockInfo } from '../core/lock-handle.js';
import type { LockMode } from '../core/lock-mode.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import type { LockList, LockListEntry } from './admin.js';
import { keyText } from './key-text.js';

/**
 * The admin reads' rows as every store answers them (the log's column names, times parsed by the
 * store: `date`), turned into the public shapes.
 */
type Row = Record<string, unknown>;
type ParseDate = (value: unknown) => Date;

function holderOf(row: Row, date: ParseDate): LockHolderInfo {
  return {
    mode: row.mode as LockMode,
    owner: String(row.owner),
    holder: String(row.holder),
    strategy: row.strategy as LockStrategyName,
    fencingToken: Number(row.fencing_token),
    acquiredAt: date(row.acquired_at),
    expiresAt: date(row.expires_at),
  };
}

/** `inspect()`'s answer: the live holders' rows, the key's counter and the server's clock. */
export function lockInfoOf(key: string, rows: readonly Row[], fencingToken: unknown, serverTime: Date, date: ParseDate): LockInfo {
  const holders = rows.map((row) => holderOf(row, date));
  return {
    key,
    mode: holders.length === 0 ? null : holders.some((h) => h.mode === 'write') ? 'write' : 'read',
    holders,
    expiresAt: holders.length ? new Date(Math.max(...holders.map((h) => h.expiresAt.getTime()))) : null,
    fencingToken: Number(fencingToken ?? 0),
    serverTime,
  };
}

/** One page of `listLocks()` from up to `limit + 1` rows (one more than the page says whether another follows). */
export function lockListOf(rows: readonly Row[], limit: number, namespace: string, serverTime: Date, date: ParseDate): LockList {
  const page = rows.slice(0, limit);
  return {
    locks: page.map((row): LockListEntry => ({
      ...holderOf(row, date),
      key: keyText(row.lock_key).slice(namespace ? namespace.length + 1 : 0),
      status: String(row.status),
      leaseMs: Number(row.lease_ms),
      heldMs: Number(row.held_ms),
      remainingMs: Number(row.remaining_ms),
    })),
    serverTime,
    next: rows.length > limit ? String(page[page.length - 1]!.id) : null,
  };
}
