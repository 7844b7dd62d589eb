import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from './test-database.js';
import { LockWorker } from './worker-host.js';
import type { ContractTarget } from './contract-targets.js';
import type { DbLockModuleOptions } from '../../lib/index.js';

/**
 * What the crash and stall suites with several processes share (contract/crash-stall-*.test.ts):
 * their scenario module, the business tables, held() to watch a worker's call, the takeover check.
 */
export const SCENARIO = new URL('../contract/scenarios/crash-stall.js', import.meta.url).href;
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
export const LEASE_MS = 1_000;
export const MARGIN_MS = 2_000;
export type Bump = { tokens: number[]; outcome: string; message?: string };

export function held(worker: LockWorker, fn: string, args: unknown, event = 'held'): { run: Promise<unknown>; seen: Promise<unknown> } {
  let seen!: (d: unknown) => void;
  const p = new Promise<unknown>((r) => (seen = r));
  const run = worker.run(SCENARIO, fn, args, (e, d) => e === event && seen(d));
  run.catch(() => undefined);
  return { run, seen: p };
}

async function setUpTables(db: TestDatabase): Promise<void> {
  await db.query(`CREATE TABLE cs_inside (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, peak INT NOT NULL DEFAULT 0)${db.sql.tableOptions}`);
  await db.query('INSERT INTO cs_inside (id) VALUES (1)');
  await db.query(
    `CREATE TABLE cs_counter (k VARCHAR(32) PRIMARY KEY, v INT NOT NULL DEFAULT 0, last_token BIGINT, last_who VARCHAR(16))${db.sql.tableOptions}`,
  );
  await db.query(`CREATE TABLE cs_writes (id ${db.sql.autoId}, who VARCHAR(16) NOT NULL, token BIGINT NOT NULL)${db.sql.tableOptions}`);
}

export async function reset(db: TestDatabase, keys: string[]): Promise<void> {
  await db.query('UPDATE cs_inside SET n = 0, peak = 0');
  await db.query('DELETE FROM cs_writes');
  for (const k of keys) await db.query(`INSERT INTO cs_counter (k) VALUES (?) ${db.sql.onDuplicateKey('k', 'v = 0')}`, [k]);
}

/** Dead rows (of `owner`) end EXPIRED, taken over; every later grant of the key starts no earlier than their lease end. */
export async function assertTakenOverAfterLease(db: TestDatabase, key: string, deadOwner: string, permits = false): Promise<number> {
  const rows = await db.logRows(key);
  const dead = rows.filter((r) => r.owner === deadOwner);
  assert.equal(dead.length, 1, `${key}: one row of the dead holder`);
  assert.equal(dead[0]!.status, 'EXPIRED', `${key}: ${JSON.stringify(dead[0])}`);
  assert.match(String(dead[0]!.note), /taken over by/);
  const leaseEnd = (dead[0]!.lease_ends_at as Date).getTime();
  // A semaphore's other permits may be granted beside it: there only the taker counts.
  const taker = String(dead[0]!.note).replace('taken over by ', '');
  const later = rows.filter((r) => Number(r.id) > Number(dead[0]!.id) && (!permits || r.owner === taker));
  assert.ok(later.length >= 1, `${key}: a later grant`);
  for (const r of later) {
    const at = (r.acquired_at as Date).getTime();
    assert.ok(at >= leaseEnd, `${key}: granted ${leaseEnd - at} ms before the dead holder's lease ended`);
  }
  const first = (later[0]!.acquired_at as Date).getTime();
  assert.ok(first - leaseEnd < MARGIN_MS, `${key}: granted ${first - leaseEnd} ms after the lease ended`);
  const tokens = rows.filter((r) => r.status !== 'FAILED').map((r) => Number(r.fencing_token));
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `${key}: tokens ${tokens}`);
  return leaseEnd;
}

/** A suite's own database with the business tables, and `count` worker processes of `target` with a lease of `leaseMs`. */
export function processesOf(
  target: ContractTarget,
  count: number,
  leaseMs: number,
): { db: TestDatabase; workers: LockWorker[]; options: DbLockModuleOptions } {
  const suite = {
    db: undefined as unknown as TestDatabase,
    workers: [] as LockWorker[],
    options: target.options({ leaseMs, retryMinDelayMs: 5, retryMaxDelayMs: 50, janitor: false }),
  };
  before(async () => {
    suite.db = await TestDatabase.forTarget(target);
    await setUpTables(suite.db);
    suite.workers = await LockWorker.startMany(count, { settings: suite.db.settings, options: suite.options });
  });
  after(async () => {
    for (const w of suite.workers) w.signal('SIGCONT'); // a test that failed may have left one stopped
    await Promise.all(suite.workers.map((w) => w.close()));
    await suite.db?.drop();
  });
  return suite;
}
