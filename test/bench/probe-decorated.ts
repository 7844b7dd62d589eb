/**
 * Development probe: the lease decorator path against its floors, interleaved op by op (the
 * machine is noisy): a plain TypeORM transaction with one UPDATE; the decorated call with its
 * business transaction opened while the grant is on the wire (the library's behaviour) and opened
 * after the grant (the early open switched off); and the physical floor of the path: a durable
 * grant shape in one round trip, then a READ COMMITTED transaction running the UPDATE and one PK
 * UPDATE of the grant's log row (the release in the business commit).
 * `node build/test/bench/probe-decorated.js [ops] [blocks]`
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { EarlyBusinessTransaction } from '../../lib/core/business-transaction.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { DecoratedWork } from './designs/decorated.js';
import type { Body } from './designs/types.js';
import { runProbe, timeShapes } from './probe-main.js';
import { claimGrantShape } from './uncontended-items.js';
import { median } from './stats.js';

const UPDATE = 'UPDATE bench_counter SET v = v + 1 WHERE id = 3';

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_probe_dec');
  const { app, locks } = await createLockApp(db.settings, {});
  const ds = app.get(DataSource);
  const floor = await mysql.createConnection({
    ...db.settings,
    multipleStatements: true,
  });
  await ds.query('CREATE TABLE IF NOT EXISTS bench_counter (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
  await ds.query('INSERT IGNORE INTO bench_counter VALUES (1,0),(2,0),(3,0)');
  let token = 0;
  const work = new DecoratedWork(locks);
  const body: Body = async (query) => void (await query(UPDATE));
  const times = () => ({ acquiredAt: 0, releasingAt: 0 });
  const open = EarlyBusinessTransaction.prototype.open;
  const items: Record<string, () => Promise<unknown>> = {
    plain: () => ds.transaction(async (manager) => manager.query(UPDATE)),
    'floor: grant shape + tx(UPDATE, PK UPDATE of its log row)': async () => {
      const [claimed] = (await floor.query(claimGrantShape(++token))) as unknown as [{ insertId: number }];
      await ds.transaction('READ COMMITTED', async (manager) => {
        await manager.query(UPDATE);
        await manager.query("UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ?", [claimed.insertId]);
      });
    },
    'decorated, transaction opened during the grant': () => {
      EarlyBusinessTransaction.prototype.open = open;
      return work.lease('probe:dec', body, times());
    },
    'decorated, transaction opened after the grant': () => {
      EarlyBusinessTransaction.prototype.open = () => undefined;
      return work.lease('probe:dec', body, times());
    },
  };
  // 'blocks': each item's ops in a row, as the bench's rounds run them; default: interleaved op by op.
  const samples = await timeShapes(items, Number(process.argv[2] ?? 1000), { serial: process.argv[3] === 'blocks' });
  EarlyBusinessTransaction.prototype.open = open;
  const plain = median(samples.plain!);
  for (const [name, xs] of Object.entries(samples))
    console.log(`${name.padEnd(56)} ${median(xs).toFixed(3)} ms  ${(median(xs) / plain).toFixed(2)}x plain`);
  await floor.end();
  await app.close();
  await db.drop();
}

runProbe(main);
