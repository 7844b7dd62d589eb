/**
 * Quick probe: median latency of uncontended exclusive acquire + release on one key, against two
 * autocommit PK UPDATEs measured in the same run. `node build/test/bench/acquire-latency.js [ops]`.
 */
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';

const ops = Number(process.argv[2] ?? 300);
const db = await TestDatabase.create('dblock_probe');
const { app, locks } = await createLockApp(db.settings, { janitor: false });
try {
  await db.query('CREATE TABLE probe (id INT PRIMARY KEY, n INT NOT NULL)');
  await db.query('INSERT INTO probe VALUES (1, 0)');
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (let round = 0; round < 3; round++) {
    const floor: number[] = [];
    const lock: number[] = [];
    for (let i = 0; i < ops; i++) {
      let t = performance.now();
      await db.query('UPDATE probe SET n = n + 1 WHERE id = 1');
      await db.query('UPDATE probe SET n = n + 1 WHERE id = 1');
      floor.push(performance.now() - t);
      t = performance.now();
      const handle = await locks.acquire('probe');
      await handle.release();
      lock.push(performance.now() - t);
    }
    const f = median(floor);
    const l = median(lock);
    process.stdout.write(`round ${round}: acquire+release ${l.toFixed(3)} ms, two PK UPDATEs ${f.toFixed(3)} ms, ratio ${(l / f).toFixed(2)}x\n`);
  }
} finally {
  await app.close();
  await db.drop();
}
