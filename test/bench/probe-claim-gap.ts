/**
 * Development probe: the library's uncontended lease acquire + release against the very statements
 * it sends, sent by hand on a mysql2 connection of their own (the claim grant's one INSERT, then the
 * release's UPDATE), and against two autocommit PK UPDATEs; interleaved op by op, on the library's
 * own tables. What lies between the library and its by-hand shape is the client's work.
 * `node build/test/bench/probe-claim-gap.js [ops] [rounds]`. PROBE_BLOCK=n times each shape in blocks
 * of n ops (PROBE_POSITIONS=1: medians by place in the block); PROBE_LAYERS=0 leaves the layers
 * out; PROBE_READS=1 adds read holds of the library's key; PROBE_ONLY=lib|hand runs one shape alone
 * (for strace or perf); PROBE_PRINT=1 prints the library's statements once, PROBE_TAP=1 every one.
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe, timeShapes } from './probe-main.js';
import { median } from './stats.js';
import { tapStatements } from '../support/statement-tap.js';
import { claimGrantShape, RELEASE_SHAPE } from './uncontended-items.js';
import { RUNNING_PARTS } from '../../lib/lock-service.assembly.js';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { newWaiter } from '../../lib/core/acquire-request.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 1000);
  const rounds = Number(process.argv[3] ?? 3);
  let seen: string[] | undefined;
  tapStatements((sql) => {
    seen?.push(sql);
    if (process.env.PROBE_TAP && sql.includes('db_lock')) console.log(sql.slice(0, 160));
  });
  const db = await TestDatabase.create('dblock_claim_gap');
  const app = await createLockApp(db.settings, process.env.PROBE_DEFAULTS ? {} : { janitor: false });
  const c = await mysql.createConnection({ ...db.settings });
  await c.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
  await c.query('INSERT INTO pk VALUES (1, 0), (2, 0)');
  const lib = async () => void (await (await app.locks.acquire('gap:lib')).release());
  for (let i = 0; i < 20; i++) await lib();
  seen = [];
  await lib();
  const [grantSql, releaseSql] = seen.filter((s) => s.includes('db_lock_log'));
  if (process.env.PROBE_PRINT) console.log(seen.join('\n'));
  // The same two statements by hand, on a key of their own: the next token, and the INSERT's new id in the release.
  const hex = (key: string) => `X'${Buffer.from(key).toString('hex')}'`;
  const grantText = grantSql!.replaceAll(hex('gap:lib'), hex('gap:hand'));
  const tokenOf = /(IS_FREE_LOCK\('[^']*'\)), (\d+), NULL\)/;
  let token = 0;
  const idOf = /WHERE id = (\d+)/;
  const c2 = await mysql.createConnection({ ...db.settings });
  const handOn = (conn: typeof c) => async () => {
    const sql = grantText.replace(tokenOf, (_all, free: string) => `${free}, ${++token}, NULL)`);
    const [ok] = (await conn.query(sql)) as unknown as [{ insertId: number }];
    await conn.query(releaseSql!.replace(idOf, `WHERE id = ${ok.insertId}`));
  };
  const hand = handOn(c);
  seen = undefined;
  if (!tokenOf.test(grantText) || !idOf.test(releaseSql!)) throw new Error(`unexpected statements:\n${grantSql}\n${releaseSql}`);
  for (let i = 0; i < 20; i++) await hand();
  // The library's layers bottom-up, each on a key of its own: what each adds shows apart.
  const parts = RUNNING_PARTS.get(app.locks)!;
  const request = (key: string) => ({
    targets: resolveTargets(key, 'write', ''),
    mode: 'write' as const,
    strategy: 'lease' as const,
    timeoutMs: 10_000,
    leaseMs: 30_000,
    maxAttempts: Infinity,
  });
  const strategy = parts.runtime.strategy('lease');
  const layers: Record<string, () => Promise<void>> = {
    'layer: store (grant + endRows)': async () => {
      const answer = await parts.store.log.grant(
        {
          acquisitionId: crypto.randomUUID(),
          strategy: 'lease',
          targets: request('gap:store').targets,
          leaseMs: 30_000,
          waitedMs: 0,
          writerWaitMarkMs: 0,
          writerPreference: true,
          doorbell: undefined,
        },
        performance.now() + 10_000,
      );
      if (!answer.granted) throw new Error('store: not granted');
      await parts.store.log.endRows(
        answer.rows.map((r) => r.id),
        'RELEASED',
      );
    },
    'layer: strategy': async () => {
      const waiter = newWaiter(request('gap:strategy'), performance.now());
      const { lock } = await strategy.tryGrant({ ...waiter, resolve: () => undefined, reject: () => undefined } as never);
      if (!lock) throw new Error('strategy: not granted');
      await strategy.release(lock, 'RELEASED' as never);
    },
    'layer: runtime': async () => {
      const lock = await parts.runtime.acquire(request('gap:runtime'));
      await parts.runtime.release(lock, false);
    },
  };
  for (const fn of Object.values(layers)) for (let i = 0; i < 20; i++) await fn();
  let floorTokens = 0;
  const shapes = {
    'two pk updates': async () => {
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 2');
    },
    'bench claim floor': async () => {
      const [ok] = (await c.query(claimGrantShape(++floorTokens))) as unknown as [{ insertId: number }];
      await c.query(RELEASE_SHAPE, [ok.insertId]);
    },
    'by hand: the same INSERT + UPDATE': hand,
    'by hand, on a connection of its own': handOn(c2),
    ...(process.env.PROBE_LAYERS === '0' ? {} : layers),
    'library: acquire + release': lib,
    'library again, right after': lib,
    ...(process.env.PROBE_READS
      ? { 'library read, same key': async () => void (await (await app.locks.acquire('gap:lib', { mode: 'read' })).release()) }
      : {}),
  };
  const only = process.env.PROBE_ONLY;
  if (only) {
    // One shape alone (for strace -c or perf on this process): PROBE_ONLY=lib or hand.
    const fn = only === 'lib' ? lib : hand;
    const t = performance.now();
    for (let i = 0; i < ops; i++) await fn();
    console.log(`${only}: ${((performance.now() - t) / ops).toFixed(3)} ms per op`);
  } else {
    // PROBE_BLOCK=n: each shape's ops in blocks of n, the blocks interleaved (as the bench's uncontended rounds run them).
    const positions: Record<string, number[][]> = {};
    const samples = await timeShapes(shapes, ops, {
      rounds,
      block: Number(process.env.PROBE_BLOCK ?? 1),
      onSample: (name, inBlock, ms) => void ((positions[name] ??= [])[inBlock] ??= []).push(ms),
    });
    const base = samples['two pk updates']!;
    for (const [name, xs] of Object.entries(samples))
      console.log(
        `${name.padEnd(36)} ${xs.map((x) => x.toFixed(3)).join(' ')} ms  ${xs.map((x, i) => (x / base[i]!).toFixed(2)).join(' ')}x  (median ${median(xs).toFixed(3)})`,
      );
    if (process.env.PROBE_POSITIONS)
      for (const [name, byPosition] of Object.entries(positions))
        console.log(`${name.padEnd(36)} by position in its block: ${byPosition.map((xs) => median(xs).toFixed(2)).join(' ')}`);
  }
  await c.end();
  await c2.end();
  await app.app.close();
  await db.drop();
}

runProbe(main);
