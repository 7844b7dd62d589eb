/**
 * Development probe: what the lease claim's and release's statement text cost on the server, on
 * one connection, op by op alternating (no connection switch between shapes): the bench's claim
 * floor; the library's text; the library's text without the doorbell test.
 * `node build/test/bench/probe-claim-text.js [ops per round] [rounds]`
 */
import 'reflect-metadata';
import mysql from 'mysql2';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 500);
  const rounds = Number(process.argv[3] ?? 9);
  const db = await TestDatabase.create('dblock_ctext');
  const c = mysql.createConnection({ ...db.settings });
  const q = (sql: string) => new Promise<any>((res, rej) => c.query(sql, (e, r) => (e ? rej(e) : res(r))));
  await q('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  const tokens: Record<string, number> = {};
  const next = (k: string) => (tokens[k] = (tokens[k] ?? 0) + 1);
  const floorClaim = (k: string) =>
    `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) VALUES ('${k}', 'write', UUID(), 'bench:floor', 'lease', ${next(k)}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`;
  const libClaim = (k: string, bell: boolean) =>
    `INSERT INTO db_lock_log (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) VALUES (X'${Buffer.from(k).toString('hex')}', 'write', '03b0e346-411a-4a45-ae4b-7cc58aa315be', 'vm:10536', '1', 'lease', ${bell ? `IF(IS_FREE_LOCK('dbl:e2_Y66E3xkv8az31H4IDOYmIeOw'), ${next(k)}, NULL)` : next(k)}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30000000 MICROSECOND, 0)`;
  const floorRelease = (id: number) => `UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ${id}`;
  const libRelease = (id: number) =>
    `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ${id} AND status IN ('ACQUIRED', 'COMPLETED')`;
  const x = (sql: string, params: unknown[]) => new Promise<any>((res, rej) => c.execute(sql, params as any, (e, r) => (e ? rej(e) : res(r))));
  const prepClaim = `INSERT INTO db_lock_log (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) VALUES (?, 'write', ?, ?, ?, 'lease', IF(IS_FREE_LOCK(?), ?, NULL), 'ACQUIRED', ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 0)`;
  const prepRelease = `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = ? WHERE id = ? AND status IN ('ACQUIRED', 'COMPLETED')`;
  const shapes: Record<string, () => Promise<void>> = {
    'library, prepared': async () => {
      const r = await x(prepClaim, [
        Buffer.from('p'),
        '03b0e346-411a-4a45-ae4b-7cc58aa315be',
        'vm:10536',
        '1',
        'dbl:e2_Y66E3xkv8az31H4IDOYmIeOw',
        next('p'),
        30000,
        30000000,
      ]);
      await x(prepRelease, [0, r.insertId]);
    },
    floor: async () => void (await q(floorRelease((await q(floorClaim('f'))).insertId))),
    library: async () => void (await q(libRelease((await q(libClaim('l', true))).insertId))),
    'library, no bell test': async () => void (await q(libRelease((await q(libClaim('n', false))).insertId))),
    'library claim, floor release': async () => void (await q(floorRelease((await q(libClaim('r', true))).insertId))),
  };
  const results: Record<string, number[]> = {};
  for (let r = -1; r < rounds; r++) {
    const samples: Record<string, number[]> = {};
    for (let i = 0; i < ops; i++)
      for (const [name, fn] of Object.entries(shapes)) {
        const t = performance.now();
        await fn();
        (samples[name] ??= []).push(performance.now() - t);
      }
    if (r < 0) continue;
    for (const [name, xs] of Object.entries(samples)) (results[name] ??= []).push(xs.sort((a, b) => a - b)[xs.length >> 1]!);
  }
  const floor = results.floor!.slice().sort((a, b) => a - b)[rounds >> 1]!;
  for (const [name, xs] of Object.entries(results)) {
    const ratios = xs.map((x, i) => x / results.floor![i]!).sort((a, b) => a - b);
    const m = xs.slice().sort((a, b) => a - b)[rounds >> 1]!;
    console.log(
      `${name.padEnd(30)} ${(m * 1000).toFixed(0)} µs (${(m / floor).toFixed(3)}× floor; per-round ratio median ${ratios[rounds >> 1]!.toFixed(3)}, ${ratios[0]!.toFixed(3)}–${ratios[rounds - 1]!.toFixed(3)})`,
    );
  }
  c.end();
  await db.drop();
}
runProbe(main);
