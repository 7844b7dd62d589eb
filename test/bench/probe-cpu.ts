/**
 * Development probe: client CPU per uncontended hold, library row-lock (`withLock`, critical
 * section through `handle.manager`) against the same statements by hand on a mysql2 connection.
 * Under contention on a 2-core host the client's CPU is on the critical path of every hold.
 * `node build/test/bench/probe-cpu.js [ops]` (add --cpu-prof to node for a profile)
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';
import { createLockApp } from '../support/lock-app.js';
import { DecoratedWork } from './designs/decorated.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 2000);
  const db = await TestDatabase.create('dblock_cpu');
  const app = await createLockApp(db.settings, { janitor: false });
  const dataSource = app.app.get(DataSource);
  await db.query('CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)');
  await db.query('INSERT INTO counter VALUES (1, 0)');
  await db.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('hand', 0)");
  const c = await mysql.createConnection({ ...db.settings });
  const cs = async (q: (sql: string, p?: unknown[]) => Promise<unknown>) => {
    await q('SELECT n FROM counter WHERE id = 1');
    await q('UPDATE counter SET n = n + 1 WHERE id = 1');
  };
  const decorated = new DecoratedWork(app.locks);
  const times = { acquiredAt: 0, releasingAt: 0 };
  const shapes: Record<string, () => Promise<unknown>> = {
    'row-lock @WriteLock': () => decorated.rowLock('d', (q) => q('UPDATE counter SET n = n + 1 WHERE id = 1').then(() => undefined), times),
    'plain TypeORM transaction': () => dataSource.transaction((m) => m.query('UPDATE counter SET n = n + 1 WHERE id = 1')),
    'empty row-lock withLock': () => app.locks.withLock('e', async () => undefined, { strategy: 'row-lock' }),
    'empty lease withLock': () => app.locks.withLock('l', async () => undefined),
    'row-lock withLock': () => app.locks.withLock('k', (h) => cs((sql, p) => h.manager!.query(sql, p)), { strategy: 'row-lock' }),
    'by hand (mysql2)': async () => {
      await c.query('START TRANSACTION');
      await c.query(
        "UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = 'hand'",
      );
      await cs((sql, p) => c.query(sql, p));
      await c.query(`CALL \`${RECORD_AND_COMMIT}\`('hand', 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`);
    },
    'by hand (TypeORM runner)': async () => {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        await runner.startTransaction();
        await runner.query(
          "UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = 'hand'",
        );
        await cs((sql, p) => runner.query(sql, p));
        await runner.query(`CALL \`${RECORD_AND_COMMIT}\`('hand', 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`);
      } finally {
        await runner.release();
      }
    },
  };
  for (const fn of Object.values(shapes)) for (let i = 0; i < 200; i++) await fn();
  for (const [name, fn] of Object.entries(shapes).filter(([n]) => !process.argv[3] || n.startsWith(process.argv[3]))) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < ops; i++) await fn();
    const cpu = process.cpuUsage(cpu0);
    const wall = performance.now() - t0;
    console.log(
      `${name.padEnd(22)} client CPU ${(((cpu.user + cpu.system) / ops) | 0).toString().padStart(4)} µs/hold (user ${(cpu.user / ops) | 0}), wall ${(wall / ops).toFixed(3)} ms/hold`,
    );
  }
  await c.end();
  await app.app.close();
  await db.drop();
}

runProbe(main);
