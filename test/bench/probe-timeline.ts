/**
 * Development probe: where the client's time goes in one uncontended row-lock hold, as a median
 * timeline (the call, each statement sent and answered on any mysql2 connection, the critical
 * section's start and end), next to the same hold by hand through a TypeORM runner, interleaved op
 * by op. Under contention the steps between the lock's answer and the critical section's first
 * statement, and between its last answer and the COMMIT, are on every handoff's path.
 * `node build/test/bench/probe-timeline.js [ops]`; `PROBE_LEASE=1` times a lease acquire + release against its
 * physical floor instead, `PROBE_DECORATED=1` the lease's `@WriteLock` path against its floor, `PROBE_DECORATED_ROW=1` the row-lock's (with `PROBE_KEEP_LIBRARY=1` beside the row-lock `withLock`); `PROBE_WRAP=1` adds the entry and settlement of
 * the library's layers, and `globalThis.__m(label)` marks dropped into build/lib by hand.
 */
import 'reflect-metadata';
import { AsyncLocalStorage } from 'node:async_hooks';
import mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { BEGIN_AND_TAKE, RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';
import { sessionQuery } from '../../lib/store/mysql/session-query.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';
import { median } from './stats.js';
import { tapStatements } from '../support/statement-tap.js';
import { claimGrantShape, FLOOR_KEY, GRANT_SHAPE, RELEASE_SHAPE } from './uncontended-items.js';
import { DecoratedWork } from './designs/decorated.js';

type Query = (sql: string) => Promise<unknown>;

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 2000);
  const db = await TestDatabase.create('dblock_timeline');
  const app = await createLockApp(db.settings, { janitor: false, ...(process.env.PROBE_OPTIONS ? JSON.parse(process.env.PROBE_OPTIONS) : {}) });
  const dataSource = app.app.get(DataSource);
  await db.query('CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)');
  await db.query('INSERT INTO counter VALUES (1, 0)');
  await db.query("INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES ('hand', 0, 1)");
  let marks: [string, number][] | undefined;
  const mark = (name: string): void => void marks?.push([name, performance.now()]);
  tapStatements((sql) => {
    const name = sql
      .replace(/\s+/g, ' ')
      .replace(/^SET STATEMENT \S+ = \S+ FOR /, '')
      .slice(0, 24);
    mark(`send ${name}`);
    return () => mark(`answer ${name}`);
  });
  const section = async (query: Query): Promise<void> => {
    mark('fn start');
    await query('SELECT n FROM counter WHERE id = 1');
    await query('UPDATE counter SET n = n + 1 WHERE id = 1');
    mark('fn end');
  };
  if (process.env.PROBE_WRAP) await wrapLayers(mark);
  (globalThis as Record<string, unknown>).__m = mark;
  const shapes: Record<string, () => Promise<unknown>> = {
    library: () => app.locks.withLock('k', (h) => section((sql) => h.manager!.query(sql)), { strategy: 'row-lock' }),
    'by hand': async () => {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        await sessionQuery(runner, `CALL \`${BEGIN_AND_TAKE}\`('hand')`);
        await section((sql) => runner.manager.query(sql));
        await sessionQuery(runner, `CALL \`${RECORD_AND_COMMIT}\`('hand', 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`);
      } finally {
        await runner.release();
      }
    },
  };
  if (process.env.PROBE_LEASE) {
    // The lease's acquire + release against its physical floor's two round trips on a plain connection.
    const floor = await mysql.createConnection({ ...db.settings, multipleStatements: true });
    await db.query('INSERT INTO db_lock (lock_key, fencing_token) VALUES (?, 0)', [FLOOR_KEY]);
    for (const name of Object.keys(shapes)) delete shapes[name];
    shapes.lease = async () => {
      const lock = await app.locks.acquire('lease');
      mark('acquired');
      await lock.release();
    };
    shapes['physical floor'] = async () => {
      const [results] = (await floor.query(GRANT_SHAPE)) as unknown as [{ insertId: number }[]];
      mark('acquired');
      await floor.query(RELEASE_SHAPE, [results[1]!.insertId]);
    };
  }
  if (process.env.PROBE_DECORATED) {
    // The lease decorator path (grant, then the fenced 'requires-new' transaction) against its floor: the claim INSERT, then a plain TypeORM transaction.
    const floor = await mysql.createConnection({ ...db.settings, multipleStatements: true });
    const work = new DecoratedWork(app.locks);
    let token = 0;
    for (const name of Object.keys(shapes)) delete shapes[name];
    shapes['lease @WriteLock'] = () => work.lease('dec', (q) => section(q).then(() => undefined), { acquiredAt: 0, releasingAt: 0 });
    shapes['floor: claim, then a TypeORM transaction'] = async () => {
      await floor.query(claimGrantShape(++token));
      mark('acquired');
      await dataSource.transaction((manager) => section((sql) => manager.query(sql)));
    };
    // The same floor with an AsyncLocalStorage store active around its transaction, as the lock context is around a locked call.
    const context = new AsyncLocalStorage<object>();
    shapes['floor, in an AsyncLocalStorage store'] = async () => {
      await floor.query(claimGrantShape(++token));
      mark('acquired');
      await context.run({}, () => dataSource.transaction((manager) => section((sql) => manager.query(sql))));
    };
  }
  if (process.env.PROBE_DECORATED_ROW) {
    // The row-lock decorator path against the same statements sent by hand on a TypeORM runner.
    const work = new DecoratedWork(app.locks);
    if (!process.env.PROBE_KEEP_LIBRARY) delete shapes.library;
    shapes['row-lock @WriteLock'] = () => work.rowLock('dec', (q) => section(q).then(() => undefined), { acquiredAt: 0, releasingAt: 0 });
  }
  for (let i = 0; i < 300; i++) for (const run of Object.values(shapes)) await run();
  const gaps = new Map<string, Map<string, number[]>>(Object.keys(shapes).map((name) => [name, new Map()]));
  const totals = new Map<string, number[]>(Object.keys(shapes).map((name) => [name, []]));
  for (let i = 0; i < ops; i++) {
    for (const [name, run] of Object.entries(shapes)) {
      marks = [];
      const t0 = performance.now();
      await run();
      mark('call end');
      totals.get(name)!.push((performance.now() - t0) * 1000);
      let previous: [string, number] = ['call', t0];
      for (const step of marks) {
        const key = `${previous[0]} → ${step[0]}`;
        const values = gaps.get(name)!.get(key) ?? [];
        values.push((step[1] - previous[1]) * 1000);
        gaps.get(name)!.set(key, values);
        previous = step;
      }
      marks = undefined;
    }
  }
  for (const [name, steps] of gaps) {
    console.log(`${name}: ${median(totals.get(name)!).toFixed(0)} µs per hold`);
    for (const [step, values] of steps) if (values.length > ops / 2) console.log(`${median(values).toFixed(0).padStart(7)} µs  ${step}`);
  }
  await app.app.close();
  await db.drop();
}

type Proto = Record<string, (...args: unknown[]) => unknown>;

/** PROBE_WRAP=1: marks entry and settlement of the library's layers on the hold's path. */
async function wrapLayers(mark: (name: string) => void): Promise<void> {
  const wrap = (label: string, proto: object, name: string): void => {
    const target = proto as Proto;
    const original = target[name]!;
    target[name] = function (this: unknown, ...args: unknown[]) {
      mark(`${label} in`);
      const out = original.apply(this, args);
      if (out instanceof Promise)
        void out.then(
          () => mark(`${label} out`),
          () => undefined,
        );
      return out;
    };
  };
  const { RowLockStrategy } = await import('../../lib/strategies/row-lock/row-lock-strategy.js');
  const { MysqlRowLockStore } = await import('../../lib/store/mysql/mysql-session-store.js');
  const { LockRuntime } = await import('../../lib/core/lock-runtime.js');
  const { CallChain } = await import('../../lib/core/call-chain.js');
  wrap('strategy.tryGrant', RowLockStrategy.prototype, 'tryGrant');
  wrap('strategy.release', RowLockStrategy.prototype, 'release');
  wrap('store.beginAndTake', MysqlRowLockStore.prototype, 'beginAndTake');
  wrap('store.recordAndCommit', MysqlRowLockStore.prototype, 'recordAndCommit');
  wrap('runtime.acquire', LockRuntime.prototype, 'acquire');
  wrap('runtime.release', LockRuntime.prototype, 'release');
  wrap('chain.acquire', CallChain.prototype, 'acquire');
}

runProbe(main);
