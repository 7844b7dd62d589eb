/**
 * Development probe: the library's uncontended lease acquire + release against the claim floor by
 * hand, interleaved op by op, and the SQL the library sent; per shape, the median time of each
 * segment of an op: before its first send, each statement on the wire, and the client's time
 * between an answer and the next send or the op's end.
 * `node build/test/bench/probe-lease-gap.js [ops per round] [rounds]`
 */
import 'reflect-metadata';
import mysql from 'mysql2';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';
import { median } from './stats.js';
import { RUNNING_PARTS } from '../../lib/lock-service.assembly.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 400);
  const rounds = Number(process.argv[3] ?? 7);
  const db = await TestDatabase.create('dblock_lgap');
  const app = await createLockApp(db.settings, { janitor: false });
  const pool = (RUNNING_PARTS.get(app.locks)!.store as unknown as { log: { pool: any } }).log.pool;
  const seen: string[] = [];
  const orig = pool.queryThen.bind(pool);
  pool.queryThen = (sql: string, ...rest: unknown[]) => {
    if (seen.length < 8) seen.push(sql);
    return orig(sql, ...rest);
  };
  const proto = (mysql as any).Connection.prototype;
  const origQuery = proto.query;
  /** The current op's send and answer times, in order. */
  let marks: number[] = [];
  proto.query = function (this: unknown, sql: any, values: any, cb: any) {
    if (typeof values === 'function') {
      cb = values;
      values = undefined;
    }
    const t0 = performance.now();
    const opMarks = marks;
    opMarks.push(t0);
    const wrapped =
      cb &&
      ((e: unknown, r: unknown, f: unknown) => {
        const answeredAt = performance.now();
        opMarks.push(answeredAt);
        cb(e, r, f);
      });
    return values === undefined ? origQuery.call(this, sql, wrapped) : origQuery.call(this, sql, values, wrapped);
  };
  const c = mysql.createConnection({ ...db.settings });
  const cRC = mysql.createConnection({ ...db.settings });
  const q = (conn: mysql.Connection, sql: string) => new Promise<any>((res, rej) => conn.query(sql, (e, r) => (e ? rej(e) : res(r))));
  await q(cRC, 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  let t = 0;
  let t2 = 0;
  const claim = (k: string, tok: number) =>
    `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) VALUES ('${k}', 'write', UUID(), 'bench:floor', 'lease', ${tok}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`;
  const rel = (id: number) => `UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ${id}`;
  const shapes: Record<string, () => Promise<void>> = {
    floor: async () => void (await q(c, rel((await q(c, claim('f', ++t))).insertId))),
    'floor RC': async () => void (await q(cRC, rel((await q(cRC, claim('g', ++t2))).insertId))),
    library: async () => void (await (await app.locks.acquire('l')).release()),
  };
  if (process.env.PROBE_ONLY) for (const name of Object.keys(shapes)) if (name !== process.env.PROBE_ONLY) delete shapes[name];
  const results: Record<string, number[]> = {};
  const cpu: Record<string, number> = {};
  const count: Record<string, number> = {};
  /** Per shape and segment, every measured op's time in µs. */
  const segments: Record<string, Record<string, number[]>> = {};
  const segmentNames = [
    'before the first send',
    'first statement on the wire',
    'answer to second send',
    'second statement on the wire',
    'answer to the end',
  ];
  for (let r = -1; r < rounds; r++) {
    const samples: Record<string, number[]> = {};
    for (let i = 0; i < ops; i++)
      for (const [name, fn] of Object.entries(shapes)) {
        const c0 = process.cpuUsage();
        marks = [];
        const t0 = performance.now();
        await fn();
        const ended = performance.now();
        (samples[name] ??= []).push(ended - t0);
        if (r >= 0 && marks.length === 4) {
          const points = [t0, ...marks, ended];
          const own = (segments[name] ??= {});
          segmentNames.forEach((segment, j) => (own[segment] ??= []).push((points[j + 1]! - points[j]!) * 1000));
        }
        const cu = process.cpuUsage(c0);
        cpu[name] = (cpu[name] ?? 0) + cu.user + cu.system;
        count[name] = (count[name] ?? 0) + 1;
      }
    if (r < 0) continue;
    for (const [name, xs] of Object.entries(samples)) (results[name] ??= []).push(xs.sort((a, b) => a - b)[xs.length >> 1]!);
  }
  for (const [name, xs] of Object.entries(results)) {
    const ratios = xs.map((x, i) => x / (results.floor ?? xs)[i]!).sort((a, b) => a - b);
    console.log(
      `${name.padEnd(12)} ratio median ${ratios[rounds >> 1]!.toFixed(3)} (${ratios[0]!.toFixed(3)}–${ratios[rounds - 1]!.toFixed(3)}), ${(xs.sort((a, b) => a - b)[rounds >> 1]! * 1000).toFixed(0)} µs`,
    );
  }
  if (process.env.PROBE_SQL) for (const sql of seen) console.log(`sent: ${sql}`);
  const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const [name, own] of Object.entries(segments))
    console.log(`${name} on the wire ${(mean(own[segmentNames[1]!]!) + mean(own[segmentNames[3]!]!)).toFixed(1)} µs/op`);
  for (const name of Object.keys(cpu)) console.log(`${name} CPU ${(cpu[name]! / count[name]!).toFixed(1)} µs/op`);
  for (const [name, own] of Object.entries(segments))
    console.log(`${name} segments, median µs: ${segmentNames.map((segment) => `${segment} ${median(own[segment]!).toFixed(1)}`).join('; ')}`);
  c.end();
  cRC.end();
  await app.app.close();
  await db.drop();
}
runProbe(main);
