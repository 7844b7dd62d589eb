/**
 * Development probe: what each part of the claim grant's INSERT and the release's UPDATE costs on
 * the server. Variants of the two statements, from the bench's bare claim floor to the library's
 * exact text, sent by hand on one connection, in blocks of 10 ops (as the bench's uncontended rounds).
 * `node build/test/bench/probe-claim-shapes.js [ops] [rounds]`
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { printAgainst, runProbe, timeShapes } from './probe-main.js';

const COLUMNS = 'lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 1000);
  const rounds = Number(process.argv[3] ?? 3);
  const db = await TestDatabase.create('dblock_claim_shapes');
  const app = await createLockApp(db.settings, { janitor: false });
  const c = await mysql.createConnection({ ...db.settings });
  await c.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
  await c.query('INSERT INTO pk VALUES (1, 0), (2, 0)');
  const tokens: Record<string, number> = {};
  const claim = (key: string, values: (token: number) => string, release: string) => async () => {
    const token = (tokens[key] = (tokens[key] ?? 0) + 1);
    const [ok] = (await c.query(values(token))) as unknown as [{ insertId: number }];
    await c.query(release.replace('?', String(ok.insertId)));
  };
  const plainRelease = "UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ?";
  const statusRelease =
    "UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ? AND status IN ('ACQUIRED', 'COMPLETED')";
  const libRelease =
    "UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ? AND status IN ('ACQUIRED', 'COMPLETED')";
  const hex = (key: string) => `X'${Buffer.from(key).toString('hex')}'`;
  /** The library's claim as it sends it for a key known free (its doorbell test, its literals). */
  const libraryClaim = (key: string, token: number) =>
    `INSERT INTO db_lock_log (${COLUMNS}, process_id) VALUES (${hex(key)}, 'write', '500947a2-43c6-443f-a140-363048cc2e70', 'vm:5007', 'lease', ` +
    `IF(IS_FREE_LOCK('dbl:OwdXXGAFdN4_XGRRPw7rM4R0lQ8'), ${token}, NULL), 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30000000 MICROSECOND, 0, '1')`;
  const shapes: Record<string, () => Promise<unknown>> = {
    'two pk updates': async () => {
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 2');
    },
    'bench claim floor': claim(
      'a',
      (t) =>
        `INSERT INTO db_lock_log (${COLUMNS}) VALUES ('a', 'write', UUID(), 'bench:floor', 'lease', ${t}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`,
      plainRelease,
    ),
    '+ literal owner, hex key, process_id': claim(
      'b',
      (t) =>
        `INSERT INTO db_lock_log (${COLUMNS}, process_id) VALUES (${hex('b')}, 'write', '500947a2-43c6-443f-a140-363048cc2e70', 'vm:5007', 'lease', ${t}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0, '1')`,
      plainRelease,
    ),
    '+ IS_FREE_LOCK': claim('c', (t) => libraryClaim('c', t), plainRelease),
    '+ IS_FREE_LOCK, release status IN': claim('d', (t) => libraryClaim('d', t), statusRelease),
    'library exact (+ FORCE INDEX)': claim('e', (t) => libraryClaim('e', t), libRelease),
    'library: acquire + release': async () => void (await (await app.locks.acquire('lib')).release()),
  };
  for (const fn of Object.values(shapes)) for (let i = 0; i < 20; i++) await fn();
  printAgainst(await timeShapes(shapes, ops, { rounds, block: Number(process.env.PROBE_BLOCK ?? 10) }), 'two pk updates');
  await c.end();
  await app.app.close();
  await db.drop();
}

runProbe(main);
