/**
 * Development probe: every statement the library sends during uncontended lease holds, with when it
 * left and when its answer came back, to see where an acquire + release spends its time.
 */
import 'reflect-metadata';
import mysql from 'mysql2';
import { DataSource } from 'typeorm';
import { DecoratedWork } from './designs/decorated.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

const Connection = (mysql as unknown as { Connection: { prototype: Record<string, unknown> } }).Connection;

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_wire');
  const { app, locks } = await createLockApp(db.settings, { janitor: false } as never);
  const events: string[] = [];
  let t0 = performance.now();
  let on = false;
  const original = Connection.prototype.query as (...args: unknown[]) => unknown;
  Connection.prototype.query = function (this: unknown, ...args: unknown[]) {
    const sql = typeof args[0] === 'string' ? args[0] : (args[0] as { sql: string }).sql;
    const sentAt = performance.now() - t0;
    const cbIndex = args.findIndex((a) => typeof a === 'function');
    if (on && cbIndex >= 0) {
      const cb = args[cbIndex] as (...r: unknown[]) => void;
      args[cbIndex] = (...r: unknown[]) => {
        events.push(`${sentAt.toFixed(3)} -> ${(performance.now() - t0).toFixed(3)}  ${String(sql).replace(/\s+/g, ' ')}`);
        cb(...r);
      };
    } else if (on) events.push(`${sentAt.toFixed(3)} (no cb) ${String(sql).slice(0, 120)}`);
    return original.apply(this, args);
  };
  for (let i = 0; i < 50; i++) await (await locks.acquire('probe:k')).release();
  const ds = app.get(DataSource);
  await ds.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT)');
  await ds.query('INSERT INTO pk VALUES (1, 0)');
  const work = new DecoratedWork(locks);
  for (let i = 0; i < 50; i++) await work.lease('probe:ld', async () => undefined, { acquiredAt: 0, releasingAt: 0 });
  for (let i = 0; i < 50; i++) await work.rowLock('probe:rd', async () => undefined, { acquiredAt: 0, releasingAt: 0 });
  const mode = process.argv[2] ?? 'lease';
  const raw = await (await import('mysql2/promise')).default.createConnection({ ...db.settings, multipleStatements: true });
  if (process.argv[4] === 'rc') await raw.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await raw.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('probe:raw', 0)");
  let rawTok = 0;
  const rawOp = async () => {
    const [r] = (await raw.query(
      `START TRANSACTION; SET STATEMENT max_statement_time = 10.250 FOR UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6), no_lease_holders = 0, writer_waiting_until = NULL WHERE lock_key = 'probe:raw' AND fencing_token = ${rawTok} AND COALESCE(IS_USED_LOCK('dbl:x'), CONNECTION_ID()) = CONNECTION_ID(); INSERT INTO db_lock_log (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) VALUES ('probe:raw', 'write', UUID(), 'vm:1', '1', 'lease', IF(ROW_COUNT() = 1, LAST_INSERT_ID(), NULL), 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30000000 MICROSECOND, 0); COMMIT`,
    )) as any;
    rawTok++;
    await raw.query(`UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)) DIV 1000 WHERE id IN (${r[2].insertId}) AND status IN ('ACQUIRED', 'COMPLETED')`);
  };
  const rawTimes: number[] = [];
  const libTimes: number[] = [];
  const n = Number(process.argv[3] ?? 500);
  const gaps = new Map<string, number[]>();
  const add = (k: string, v: number) => gaps.set(k, [...(gaps.get(k) ?? []), v]);
  for (let i = 0; i < n; i++) {
    const tr = performance.now();
    await rawOp();
    rawTimes.push(performance.now() - tr);
    on = true;
    t0 = performance.now();
    if (mode === 'lease') {
      const lock = await locks.acquire('probe:k');
      events.push(`${(performance.now() - t0).toFixed(3)} acquired`);
      await lock.release();
    } else if (mode === 'row-dec') {
      await work.rowLock('probe:rd', async (q) => void (await q('UPDATE pk SET v = v + 1 WHERE id = 1')), { acquiredAt: 0, releasingAt: 0 });
    } else if (mode === 'lease-dec') {
      await work.lease('probe:ld', async (q) => void (await q('UPDATE pk SET v = v + 1 WHERE id = 1')), { acquiredAt: 0, releasingAt: 0 });
    } else if (mode === 'plain') {
      await ds.transaction(async (m) => m.query('UPDATE pk SET v = v + 1 WHERE id = 1'));
    } else {
      await locks.withLock('probe:r', async () => {}, { strategy: 'row-lock' } as never);
    }
    events.push(`${(performance.now() - t0).toFixed(3)} released`);
    on = false;
    libTimes.push(performance.now() - t0);
    const lines = events.splice(0);
    let last = 0;
    lines.forEach((line, j) => {
      const m = /^([\d.]+)(?: -> ([\d.]+))?/.exec(line)!;
      const a = Number(m[1]);
      add(`client before #${j}`, a - last);
      if (m[2]) {
        add(`server #${j} ${line.slice(line.indexOf('  ') + 2, line.indexOf('  ') + 40).replace(/\d+/g, 'N')}`, Number(m[2]) - a);
        last = Number(m[2]);
      } else last = a;
    });
    if (i === n - 1) console.log(lines.join('\n'));
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  console.log(`raw ${med(rawTimes).toFixed(3)} lib ${med(libTimes).toFixed(3)}`);
  for (const [k, xs] of gaps) console.log(`${k.padEnd(60)} median ${med(xs).toFixed(3)} ms`);
  await raw.end();
  await app.close();
  await db.drop();
}
void main();
