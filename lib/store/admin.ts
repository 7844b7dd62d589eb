import type { HolderMode } from '../core/lock-mode.js';
import { describe } from '../core/option-checks.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/** Operator calls' public shapes and argument checks (validated before any statement); the reads are each store's. */

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
  /** Its mode ('permit' for a semaphore's permit). */
  readonly mode: HolderMode;
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
  /** Its mode ('permit' for a semaphore's permit). */
  readonly mode: HolderMode;
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
