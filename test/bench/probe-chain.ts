/**
 * Development probe: one lease handoff's server chain, by hand on two raw connections: the holder
 * rings the bell; the waiter parked on it runs its grant batch. Times from the ring sent to the
 * waiter's answer, for a one-commit handover (the waiter ends the holder's row in its grant, found
 * by a search or given by id) against the two-commit shape (the holder ends its own row first).
 * With PROFILE=1 it also prints the last batches' statements as the server timed them.
 * See docs/notes/lease-handoff.md. `node build/test/bench/probe-chain.js [handoffs]`
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 200);
  const db = await TestDatabase.create('dblock_chain');
  const open = async () => {
    const c = await mysql.createConnection({ ...db.settings, multipleStatements: true });
    await c.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    return c;
  };
  const [a, b] = [await open(), await open()];
  if (process.env.PROFILE) for (const c of [a, b]) await c.query('SET profiling = 1, profiling_history_size = 100');
  await a.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('k', 0)");
  const bell = 'dbl:probe';
  const cols = 'lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms';
  const grant = (handover: boolean, knownRow?: number) =>
    [
      `SELECT GET_LOCK('${bell}', 5) INTO @got`,
      'START TRANSACTION',
      ...(knownRow !== undefined
        ? [
            `UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), note = 'h' WHERE id = ${knownRow} AND status IN ('ACQUIRED','COMPLETED')`,
          ]
        : []),
      ...(handover
        ? [
            `SELECT MAX(id) INTO @h FROM db_lock_log WHERE lock_key = 'k' AND status IN ('ACQUIRED','COMPLETED') AND IS_USED_LOCK('${bell}') = CONNECTION_ID() AND IS_USED_LOCK(CONCAT('${bell}', '#', id)) IS NOT NULL`,
            `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), note = 'h' WHERE id = @h AND status IN ('ACQUIRED','COMPLETED')`,
          ]
        : []),
      `UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1) WHERE lock_key = 'k' AND NOT EXISTS (SELECT 1 FROM db_lock_log g WHERE g.lock_key = 'k' AND g.status IN ('ACQUIRED','COMPLETED') AND g.lock_key = db_lock.lock_key)`,
      `INSERT INTO db_lock_log (${cols}) VALUES ('k', 'write', '${randomUUID()}', 'h', 1, 'lease', IF(ROW_COUNT() = 1, LAST_INSERT_ID(), NULL), 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`,
      'COMMIT',
    ].join('; ');
  type Ok = { insertId: number };
  // a holds the key and the bell
  await a.query(`SELECT GET_LOCK('${bell}', 0)`);
  let [r] = (await a.query(grant(false).replace(/^SELECT GET_LOCK.*?; /, ''))) as unknown as [Ok[]];
  let holder = { c: a, row: r.at(-2)!.insertId };
  let waiter = b;
  // Three shapes, in turn: the waiter ends the holder's row found by a search (it does not know its
  // id), the waiter ends it by a known id (the cheapest handover possible), the holder ends its own.
  // 'releaser grants': the holder ends its row and writes the waiter's grant (its claimed token) in
  // one commit, then rings; the waiter, parked on the bell, only reads its row back.
  const shapes = ['handover (row searched)', 'handover (row id known)', 'two commits', 'releaser grants'] as const;
  const times: Record<string, number[]> = Object.fromEntries(shapes.map((k) => [k, []]));
  for (let i = 0; i < n; i++) {
    const shape = shapes[i % shapes.length]!;
    const handover = shape !== 'two commits' && shape !== 'releaser grants';
    const owner = randomUUID();
    const parked =
      shape === 'releaser grants'
        ? waiter.query(`SELECT GET_LOCK('${bell}', 5) INTO @got; SELECT id AS insertId, fencing_token FROM db_lock_log WHERE owner = '${owner}'`)
        : waiter.query(shape === 'handover (row searched)' ? grant(true) : grant(false, handover ? holder.row : undefined));
    for (let j = 0; j < 3; j++) await holder.c.query('SELECT 1');
    const t = performance.now();
    if (shape === 'releaser grants')
      await holder.c.query(
        `START TRANSACTION; UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6) WHERE id = ${holder.row}; ` +
          `UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1) WHERE lock_key = 'k'; ` +
          `INSERT INTO db_lock_log (${cols}) VALUES ('k', 'write', '${owner}', 'h', 1, 'lease', LAST_INSERT_ID(), 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0); ` +
          `COMMIT; DO RELEASE_LOCK('${bell}')`,
      );
    else if (handover) await holder.c.query(`DO GET_LOCK('${bell}#${holder.row}', 0); DO RELEASE_LOCK('${bell}')`);
    else
      await holder.c.query(
        `UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6) WHERE id = ${holder.row}; DO RELEASE_LOCK('${bell}')`,
      );
    [r] = (await parked) as unknown as [Ok[]];
    if (shape === 'releaser grants') r = [...(r as unknown as Ok[][]).at(-1)!, {} as Ok];
    times[shape]!.push(performance.now() - t);
    if (handover)
      await holder.c.query(
        `UPDATE db_lock_log SET status = 'RELEASED' WHERE id = ${holder.row} AND status = 'ACQUIRED'; DO RELEASE_LOCK('${bell}#${holder.row}')`,
      );
    holder = { c: waiter, row: r.at(-2)!.insertId };
    waiter = holder.c === a ? b : a;
  }
  if (process.env.PROFILE) {
    const [rows] = (await waiter.query('SHOW PROFILES')) as unknown as [{ Query_ID: number; Duration: number; Query: string }[]];
    for (const row of rows.slice(-24)) console.log(Number(row.Duration * 1000).toFixed(3), 'ms', row.Query.slice(0, 90));
  }
  const bare: number[] = [];
  await holder.c.query(`SELECT RELEASE_LOCK('${bell}')`);
  await a.query(`SELECT GET_LOCK('${bell}', 0)`);
  for (let i = 0; i < n; i++) {
    const [h, w] = i % 2 === 0 ? [a, b] : [b, a];
    const parked = w.query(`SELECT GET_LOCK('${bell}', 5)`);
    for (let j = 0; j < 3; j++) await h.query('SELECT 1');
    const t = performance.now();
    await h.query(`DO RELEASE_LOCK('${bell}')`);
    await parked;
    bare.push(performance.now() - t);
  }
  times['bare bell wake-up'] = bare;
  const p50 = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  for (const [k, xs] of Object.entries(times)) console.log(`${k.padEnd(12)} ring sent → next holder answered p50 ${p50(xs).toFixed(3)} ms`);
  await a.end();
  await b.end();
  await db.drop();
}

runProbe(main);
