/**
 * Development probe: what one durable write costs by shape on this server, interleaved op by op
 * on one connection (the machine is noisy): which part of a lease hold's two commits is the
 * fsync and which is row work (secondary indexes, row size, statements per transaction).
 * `node build/test/bench/probe-write-costs.js [ops]`
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import { runProbe, timeShapes } from './probe-main.js';
import { median } from './stats.js';

type Ok = { affectedRows: number; insertId: number };

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_wcost');
  const c = await mysql.createConnection({ ...db.settings, multipleStatements: true, dateStrings: true, timezone: 'Z' });
  await c.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await c.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('m', 0), ('g', 0)");
  await c.query('CREATE TABLE bare_log LIKE db_lock_log');
  for (const ix of ['idx_db_lock_log_key_status', 'idx_db_lock_log_status_process', 'idx_db_lock_log_acquired'])
    await c.query(`ALTER TABLE bare_log DROP INDEX ${ix}`);
  const cols = 'lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms';
  const vals = () =>
    `'g', 'write', '${randomUUID()}', 'h:1', 1, 'lease', 1, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0`;
  const ins = async (table: string) => ((await c.query(`INSERT INTO ${table} (${cols}) VALUES (${vals()})`)) as unknown as [Ok])[0].insertId;
  const endRow = (table: string, id: number) =>
    c.query(`UPDATE ${table} SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 1 WHERE id = ${id} AND status = 'ACQUIRED'`);
  const pre: Record<string, number[]> = { log: [], bare: [], log2: [] };
  for (let i = 0; i < 25000; i++) {
    if (i % 1000 === 0) await c.query('START TRANSACTION');
    pre.log!.push(await ins('db_lock_log'));
    pre.bare!.push(await ins('bare_log'));
    pre.log2!.push(await ins('db_lock_log'));
    if (i % 1000 === 999) await c.query('COMMIT');
  }
  await c.query(
    `CREATE PROCEDURE grant_p(IN k VARBINARY(764), IN o CHAR(36)) BEGIN START TRANSACTION; UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1) WHERE lock_key = k; ` +
      `INSERT INTO db_lock_log (${cols}) VALUES (k, 'write', o, 'h:1', 1, 'lease', LAST_INSERT_ID(), 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0); COMMIT; END`,
  );
  const shapes: Record<string, () => Promise<unknown>> = {
    'two pk updates (the bench baseline)': async () => {
      await c.query("UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = 'm'");
      await c.query("UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = 'm'");
    },
    'CALL grant_p (UPDATE key; INSERT log; COMMIT)': () => c.query(`CALL grant_p('g', '${randomUUID()}')`),
    'pk update (counter)': () => c.query("UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = 'm'"),
    'log row: status change (2 indexes)': () => endRow('db_lock_log', pre.log!.pop()!),
    'log row: no indexed column': () => c.query(`UPDATE db_lock_log SET ended_at = UTC_TIMESTAMP(6), hold_ms = 1 WHERE id = ${pre.log2!.pop()!}`),
    'bare log row: status change': () => endRow('bare_log', pre.bare!.pop()!),
    'insert log row (3 indexes)': () => ins('db_lock_log'),
    'insert bare log row': () => ins('bare_log'),
    'tx: UPDATE key; INSERT log; COMMIT': () =>
      c.query(
        `START TRANSACTION; UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1) WHERE lock_key = 'g'; INSERT INTO db_lock_log (${cols}) VALUES (${vals()}); COMMIT`,
      ),
    'tx: UPDATE key; INSERT bare; COMMIT': () =>
      c.query(
        `START TRANSACTION; UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1) WHERE lock_key = 'g'; INSERT INTO bare_log (${cols}) VALUES (${vals()}); COMMIT`,
      ),
    'select 1': () => c.query('SELECT 1'),
  };
  const results = await timeShapes(shapes, Number(process.argv[2] ?? 300), { rounds: 5, serial: process.argv[3] === 'serial' });
  const floor = median(results['pk update (counter)']!);
  for (const [name, xs] of Object.entries(results))
    console.log(
      `${name.padEnd(40)} ${median(xs).toFixed(3)} ms  ${(median(xs) / floor).toFixed(2)}x one PK update  (rounds ${xs.map((x) => x.toFixed(3)).join(' ')})`,
    );
  await c.end();
  await db.drop();
}

runProbe(main);
