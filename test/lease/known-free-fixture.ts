import { after, before } from 'node:test';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { mysqlLogOf } from '../support/lock-internals.js';
import type { ContractTarget } from '../support/contract-targets.js';

/** The one-INSERT grant and the token it claims (a literal; wrapped in the doorbell test when the key has a bell). */
export const knownFreeGrant =
  /^(?:SET STATEMENT [^;]* FOR )?INSERT INTO db_lock_log \(.*\) VALUES \(.*'lease', (?:IF\(.*, )?(\d+)(?:, NULL\))?, 'ACQUIRED'/;

/** Two processes' lock services on one database, the grant statements of the first one recorded. */
export interface KnownFreeFixture {
  db: TestDatabase;
  apps: INestApplicationContext[];
  /** The process whose grants are recorded. */
  mine: LockService;
  /** Another process. */
  theirs: LockService;
  /** The grant statements `mine` sent since the last call. */
  grantsSent(): string[];
  /** Our acquire and release of `key`: the key is known free at its token afterwards. */
  heldOnce(key: string): ReturnType<LockService['acquire']>;
  /** Rows of `key` in a lock table. */
  rowsOfKey(table: 'db_lock' | 'db_lock_log', key: string): Promise<number>;
  /** Backdates every log row of `key` by an hour: as if the janitor's keeping times had passed (a process's knowledge would have expired too). */
  agedAnHour(key: string): Promise<unknown>;
  /** One janitor run with these settings, from a process of its own (its timer effectively off); its report. */
  runJanitorOnce(janitor: { idleKeyMs?: number; logRetentionMs?: number }): ReturnType<LockService['runJanitor']>;
}

/** Builds the fixture before the suite's tests (closed after them); its fields are set once they start. */
export function knownFreeFixture(target: ContractTarget): KnownFreeFixture {
  let sent: string[] = [];
  const f: KnownFreeFixture = {
    apps: [],
    grantsSent: () =>
      sent.splice(0).filter((sql) => sql.startsWith('START TRANSACTION') || /^(SET STATEMENT .* FOR )?INSERT INTO db_lock_log/.test(sql)),
    heldOnce: async (key) => {
      const handle = await f.mine.acquire(key);
      await handle.release();
      return handle;
    },
    rowsOfKey: async (table, key) =>
      Number((await f.db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM ${table} WHERE lock_key = ?`, [Buffer.from(key)]))[0]!.n),
    agedAnHour: (key) =>
      f.db.query(
        'UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 1 HOUR, expires_at = expires_at - INTERVAL 1 HOUR, ended_at = ended_at - INTERVAL 1 HOUR WHERE lock_key = ?',
        [Buffer.from(key)],
      ),
    runJanitorOnce: async (janitor) => {
      const run = await createLockApp(f.db.settings, { ...target.options(), janitor: { intervalMs: 3_600_000, ...janitor } });
      try {
        return await run.locks.runJanitor();
      } finally {
        await run.app.close();
      }
    },
  } as Partial<KnownFreeFixture> as KnownFreeFixture; // db, mine and theirs: set in before()

  before(async () => {
    f.db = await TestDatabase.create();
    const a = await createLockApp(f.db.settings, { ...target.options(), janitor: false });
    const b = await createLockApp(f.db.settings, { ...target.options(), janitor: false });
    f.apps.push(a.app, b.app);
    f.mine = a.locks;
    f.theirs = b.locks;
    sent = [];
    const pool = mysqlLogOf(f.mine).pool;
    // Every statement of the pool goes through queryThen (query is built on it).
    const queryThen = pool.queryThen.bind(pool);
    pool.queryThen = ((sql: string, ...rest: unknown[]) => {
      sent.push(sql);
      return (queryThen as (...args: unknown[]) => unknown)(sql, ...rest);
    }) as typeof pool.queryThen;
  });
  after(async () => {
    for (const app of f.apps) await app.close();
    await f.db.drop();
  });
  return f;
}
