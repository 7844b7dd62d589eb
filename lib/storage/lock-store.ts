import { setTimeout as sleep } from 'node:timers/promises';
import { DbLockSchemaError } from '../errors/db-lock-schema.error.js';
import { isTransient, LockConnectionPool, LockStatementAbortedError } from './lock-connection-pool.js';
import {
  extendStatement,
  GRANT_ROWS_INDEX,
  GRANT_SUMMARY_INDEX,
  grantStatement,
  type GrantStatementInput,
  inspectStatement,
  ownerRowsStatement,
  releaseStatement,
  renewStatement,
  SCHEMA_CHECK_STATEMENT,
} from './lock-sql.js';
import { LockStatus } from './lock-tables.js';
import type { LockMode } from '../lock-mode.js';

export interface GrantedRow {
  readonly id: string;
  readonly storedKey: string;
  readonly fencingToken: number;
  readonly expiresAt: Date;
}

export type GrantOutcome =
  | { readonly granted: true; readonly rows: readonly GrantedRow[]; readonly reclaimed: number }
  | { readonly granted: false; readonly reason: 'busy' | 'writer-waiting' | 'transient' };

export interface LiveHolder {
  readonly id: string;
  readonly mode: LockMode;
  readonly owner: string;
  readonly holder: string;
  readonly fencingToken: number;
  readonly status: string;
  readonly acquiredAt: Date;
  readonly expiresAt: Date;
}

/**
 * How long a release, extend or renewal keeps re-sending itself after deadlocks or lock-wait
 * timeouts. Releases and renewals touch few rows but through secondary indexes (owner, status,
 * expiry) that grants and renewals also walk, so under heavy contention InnoDB can pick them as
 * deadlock victims several times in a row; giving up early would surface a raw 1213 to a caller
 * whose release then never happened (the key stays taken until its lease runs out).
 */
const TRANSIENT_RETRY_MS = 3_000;

/**
 * The lease protocol's statements against the library's pool, with their results parsed.
 * Knows SQL and rows; knows nothing of waiting, handles or contexts.
 */
export class LockStore {
  constructor(readonly pool: LockConnectionPool) {}

  /**
   * One grant attempt for all keys (one round trip). Deadlock and lock-wait timeout come back as
   * "not granted" for the caller to retry within its budget. If the statement's outcome is unknown
   * (killed at the deadline, connection lost) any rows it may have committed are given back before
   * the error is rethrown, so a caller told "no" never holds a lock it does not know about.
   */
  async tryGrant(input: GrantStatementInput, timeoutMs: number): Promise<GrantOutcome> {
    let results: unknown[][];
    try {
      results = await this.pool.query<unknown[][]>(grantStatement(input), timeoutMs);
    } catch (error) {
      if (isTransient(error)) return { granted: false, reason: 'transient' };
      if (error instanceof LockStatementAbortedError) await this.abandon(input.owner);
      throw error;
    }
    const summary = results[GRANT_SUMMARY_INDEX]![0] as Record<string, unknown>;
    if (Number(summary.granted) !== 1) {
      return { granted: false, reason: Number(summary.busy) > 0 ? 'busy' : 'writer-waiting' };
    }
    const rows = (results[GRANT_ROWS_INDEX] as Record<string, unknown>[]).map(toGrantedRow);
    return { granted: true, rows, reclaimed: Number(summary.reclaimed) };
  }

  /** Ends every live row of `owner`; returns how many rows it ended. */
  async release(owner: string, status: typeof LockStatus.RELEASED | typeof LockStatus.FAILED, note?: string): Promise<number> {
    const result = await this.withRetries(() => this.pool.query<{ affectedRows: number }>(releaseStatement(owner, status, note)));
    return result.affectedRows;
  }

  /** New lease for every live row of `owner`; returns the rows still live, with their new expiry. */
  async extend(owner: string, leaseMs: number): Promise<{ storedKey: string; expiresAt: Date }[]> {
    const results = await this.withRetries(() => this.pool.query<unknown[][]>(extendStatement(owner, leaseMs)));
    return (results[1] as Record<string, unknown>[]).map((row) => ({
      storedKey: keyText(row.lock_key),
      expiresAt: parseDate(row.expires_at),
    }));
  }

  /**
   * One statement renewing every live row of these owners; returns live row counts per owner.
   * Sent on the pool's reserved connection: renewals never queue behind grants.
   */
  async renew(owners: readonly string[], timeoutMs: number): Promise<Map<string, { live: number; expiresAt: Date }>> {
    const results = await this.withRetries(() => this.pool.query<unknown[][]>(renewStatement(owners), timeoutMs, 'reserved'));
    const live = new Map<string, { live: number; expiresAt: Date }>();
    for (const row of results[1] as Record<string, unknown>[]) {
      live.set(String(row.owner), { live: Number(row.live), expiresAt: parseDate(row.expires_at) });
    }
    return live;
  }

  /** Every row of one owner with its status: names what a stale holder lost. */
  async ownerRows(owner: string): Promise<{ storedKey: string; status: string; fencingToken: number; note: string | null }[]> {
    const rows = await this.pool.query<Record<string, unknown>[]>(ownerRowsStatement(owner));
    return rows.map((row) => ({
      storedKey: keyText(row.lock_key),
      status: String(row.status),
      fencingToken: Number(row.fencing_token),
      note: row.note === null || row.note === undefined ? null : String(row.note),
    }));
  }

  /** Live holders of a key (by the server clock), the server's time and the key's fencing counter. */
  async inspect(key: Buffer): Promise<{ holders: LiveHolder[]; serverNow: Date; fencingToken: number }> {
    const results = await this.pool.query<unknown[][]>(inspectStatement(key));
    const holders = (results[0] as Record<string, unknown>[]).map((row) => ({
      id: String(row.id),
      mode: row.mode as LockMode,
      owner: String(row.owner),
      holder: String(row.holder),
      fencingToken: Number(row.fencing_token),
      status: String(row.status),
      acquiredAt: parseDate(row.acquired_at),
      expiresAt: parseDate(row.expires_at),
    }));
    const meta = (results[1] as Record<string, unknown>[])[0]!;
    return { holders, serverNow: parseDate(meta.now_at), fencingToken: Number(meta.fencing_token ?? 0) };
  }

  /** Gives back whatever an attempt of unknown outcome may have committed. */
  async abandon(owner: string): Promise<void> {
    await this.release(owner, LockStatus.RELEASED, 'abandoned: the caller had already given up');
  }

  /** Fails with DbLockSchemaError naming the migration when the tables are missing or old. */
  async checkSchema(): Promise<void> {
    try {
      await this.pool.query(SCHEMA_CHECK_STATEMENT);
    } catch (error) {
      const errno = (error as { errno?: number }).errno;
      if (errno === 1146 || errno === 1054) {
        throw new DbLockSchemaError(
          `The lock tables are missing or out of date (${(error as Error).message}). Run the migration ` +
            `CreateDbLockTables1763769600000 (exported as DB_LOCK_MIGRATIONS from 'nestjs-db-lock') before starting the app.`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /** Sends again after a deadlock or lock-wait timeout (a few times, with jitter). */
  async withRetries<T>(send: () => Promise<T>): Promise<T> {
    const giveUpAt = performance.now() + TRANSIENT_RETRY_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await send();
      } catch (error) {
        if (!isTransient(error) || performance.now() >= giveUpAt) throw error;
        await sleep(2 + Math.random() * Math.min(20 * attempt, 200));
      }
    }
  }
}

function toGrantedRow(row: Record<string, unknown>): GrantedRow {
  return {
    id: String(row.id),
    storedKey: keyText(row.lock_key),
    fencingToken: Number(row.fencing_token),
    expiresAt: parseDate(row.expires_at),
  };
}

export function keyText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

/** DATETIME(6) strings from the server, in UTC. Millisecond precision is all a Date holds. */
export function parseDate(value: unknown): Date {
  if (value instanceof Date) return value;
  return new Date(String(value).replace(' ', 'T') + 'Z');
}
