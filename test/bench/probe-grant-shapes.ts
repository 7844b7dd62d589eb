/**
 * Development probe: the single-key grant plans against the physical floor, interleaved op by op
 * on one connection (the machine is noisy). Each op is a grant followed by the PK release.
 * `node build/test/bench/probe-grant-shapes.js [ops]`
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { fastSingleKeyGrantPlan } from '../../lib/store/mysql/fast-grant.sql.js';
import type { GrantInput } from '../../lib/store/mysql/grant.sql.js';
import { singleKeyGrantPlan } from '../../lib/store/mysql/single-key-grant.sql.js';
import { TestDatabase } from '../support/test-database.js';
import { benchGrantInput } from './designs/grant-input.js';
import { runProbe, timeShapes } from './probe-main.js';
import { median } from './stats.js';
import { AddTokenClaims1798156800000, DB_LOCK_MIGRATIONS } from '../../lib/index.js';

type Ok = { affectedRows: number; insertId: number };

async function main(): Promise<void> {
  // The tables as before the claims migration: each shape below brings its own data model.
  const db = await TestDatabase.create('dblock_shape', { lockTables: false });
  for (const Migration of DB_LOCK_MIGRATIONS as (new () => { up(runner: unknown): Promise<void> })[])
    if (Migration !== (AddTokenClaims1798156800000 as unknown)) await new Migration().up({ query: (sql: string, p?: unknown[]) => db.query(sql, p) });
  const c = await mysql.createConnection({ ...db.settings, multipleStatements: true, dateStrings: true, timezone: 'Z' });
  await c.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  for (const k of ['f', 'full', 'fast', 'bare', 'm', 'g', 'h']) await c.query(`INSERT INTO db_lock (lock_key, fencing_token) VALUES ('${k}', 0)`);
  // A data model where the grant is one INSERT: the log row takes the key's live slot (a unique
  // column, NULL once ended), its auto-increment id is the token, and the release empties the slot.
  await c.query('CREATE TABLE db_lock_slot LIKE db_lock_log');
  await c.query('ALTER TABLE db_lock_slot ADD COLUMN live_key VARBINARY(764) NULL, ADD UNIQUE KEY live_key (live_key)');
  // A data model where the grant is one INSERT that claims the key's next token: a unique index on
  // (lock_key, claimed token), the token the client's own last grant of the key plus one (a row
  // that claimed it first, any holder since, makes the INSERT fail with a duplicate key).
  await c.query('CREATE TABLE db_lock_claim LIKE db_lock_log');
  await c.query(
    "ALTER TABLE db_lock_claim ADD COLUMN token_claim BIGINT UNSIGNED AS (IF(status = 'FAILED', NULL, fencing_token)) STORED, ADD UNIQUE KEY key_token (lock_key, token_claim)",
  );
  // A data model where the exclusive holder lives on the key row (one conditional PK UPDATE grants)
  // and the audit row is written once, when the hold ends, by a trigger on the key row: the release
  // is one autocommit UPDATE whose trigger inserts the finished log row in the same statement.
  await c.query(
    'CREATE TABLE db_lock_held (lock_key VARBINARY(764) NOT NULL PRIMARY KEY, fencing_token BIGINT NOT NULL DEFAULT 0, ' +
      'owner CHAR(36) NULL, holder VARCHAR(255) NULL, process_id BIGINT NULL, lease_ms INT NULL, acquired_at DATETIME(6) NULL, ' +
      'expires_at DATETIME(6) NULL, wait_ms INT NULL, end_status VARCHAR(16) NULL, readers INT NOT NULL DEFAULT 0) ENGINE=InnoDB',
  );
  await c.query("INSERT INTO db_lock_held (lock_key) VALUES ('t'), ('x')");
  await c.query('CREATE TABLE db_lock_ended LIKE db_lock_log');
  await c.query(
    'CREATE TRIGGER db_lock_held_end AFTER UPDATE ON db_lock_held FOR EACH ROW BEGIN ' +
      'IF OLD.owner IS NOT NULL AND NEW.owner IS NULL AND NEW.end_status IS NOT NULL THEN ' +
      `INSERT INTO db_lock_ended (${'lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms'}, ended_at, hold_ms) ` +
      "VALUES (OLD.lock_key, 'write', OLD.owner, OLD.holder, OLD.process_id, 'lease', OLD.fencing_token, NEW.end_status, OLD.lease_ms, OLD.acquired_at, OLD.expires_at, OLD.wait_ms, " +
      'UTC_TIMESTAMP(6), TIMESTAMPDIFF(MICROSECOND, OLD.acquired_at, UTC_TIMESTAMP(6)) DIV 1000); END IF; END',
  );
  const heldGrant = (key: string, owner: string) =>
    c.query(
      `UPDATE db_lock_held SET fencing_token = LAST_INSERT_ID(fencing_token + 1), owner = '${owner}', holder = 'h:1', process_id = 1, lease_ms = 30000, ` +
        `acquired_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, wait_ms = 0, end_status = NULL WHERE lock_key = '${key}' AND owner IS NULL AND readers = 0`,
    ) as unknown as Promise<[Ok]>;
  const release = (id: number | string, table = 'db_lock_log') =>
    c.query(
      `UPDATE ${table} SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)) DIV 1000 WHERE id IN (${id}) AND status IN ('ACQUIRED','COMPLETED')`,
    );
  const input = (key: string): GrantInput => benchGrantInput(key, { doorbell: 'dbl:probe', statementLimit: { kind: 'mariadb', ms: 10_000 } });
  const cols = 'lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms';
  const fastSql = (key: string, withProbe: boolean) => {
    const sql = fastSingleKeyGrantPlan(input(key), Date.now).statements.join(';\n');
    return withProbe ? sql : sql.replace(/ AND NOT EXISTS \(.*?\.lock_key\)/s, '');
  };
  /** The fast plan without its NOT EXISTS and with `edit` applied, then the release. */
  const fastWithout = (edit: (sql: string) => string) => async () => {
    const [r] = (await c.query(edit(fastSql('bare', false)))) as unknown as [Ok[]];
    await release(r[2]!.insertId);
  };
  const noBound = (sql: string) => sql.replace(/SET STATEMENT \S+ = \S+ FOR /g, '');
  const noBell = (sql: string) => sql.replace(/ AND COALESCE\(IS_USED_LOCK.*?= CONNECTION_ID\(\)/s, '');
  let sharedTokens = 0;
  let claimedTokens = 0;
  const shapes: Record<string, () => Promise<unknown>> = {
    'two pk updates': async () => {
      await c.query("UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = 'm'");
      await c.query("UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = 'm'");
    },
    'floor (grant shape + release)': async () => {
      const [r] = (await c.query(
        `START TRANSACTION; INSERT INTO db_lock_log (${cols}) VALUES ('f', 'write', '${randomUUID()}', 'h:1', 1, 'lease', 1, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0); UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = 'f'; COMMIT`,
      )) as unknown as [Ok[]];
      await release(r[1]!.insertId);
    },
    'fast plan + release': async () => {
      const [r] = (await c.query(fastSql('fast', true))) as unknown as [Ok[]];
      await release(r[2]!.insertId);
    },
    'fast plan without NOT EXISTS + release': async () => {
      const [r] = (await c.query(fastSql('bare', false))) as unknown as [Ok[]];
      await release(r[2]!.insertId);
    },
    ...(process.env.PROBE_FAST_PARTS
      ? {
          'fast, no NOT EXISTS, no SET STATEMENT': fastWithout(noBound),
          'fast, no NOT EXISTS, no bell test': fastWithout(noBell),
          'fast, neither, no extra columns': fastWithout((sql) =>
            noBound(noBell(sql)).replace(/, last_granted_at = [^,]+, no_lease_holders = 0, writer_waiting_until = NULL/, ''),
          ),
        }
      : {}),
    'one INSERT taking the live slot + release emptying it': async () => {
      const [r] = (await c.query(
        `INSERT INTO db_lock_slot (${cols}, live_key) VALUES ('s', 'write', '${randomUUID()}', 'h:1', 1, 'lease', 1, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0, 's')`,
      )) as unknown as [Ok];
      await c.query(
        `UPDATE db_lock_slot SET status = 'RELEASED', live_key = NULL, ended_at = UTC_TIMESTAMP(6), hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)) DIV 1000 WHERE id = ${r.insertId} AND status IN ('ACQUIRED','COMPLETED')`,
      );
    },
    'one INSERT claiming the next token (unique key, token) + release': async () => {
      const [r] = (await c.query(
        `INSERT INTO db_lock_claim (${cols}) VALUES ('c', 'write', '${randomUUID()}', 'h:1', 1, 'lease', ${++claimedTokens}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`,
      )) as unknown as [Ok];
      await release(r.insertId, 'db_lock_claim');
    },
    'one INSERT … SELECT testing the key row under a shared lock + release': async () => {
      const [r] = (await c.query(
        `INSERT INTO db_lock_log (${cols}) SELECT lock_key, 'write', '${randomUUID()}', 'h:1', 1, 'lease', fencing_token + ${++sharedTokens}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0 ` +
          `FROM db_lock WHERE lock_key = 'g' AND fencing_token = 0 LOCK IN SHARE MODE`,
      )) as unknown as [Ok];
      if (r.affectedRows !== 1) throw new Error('not granted');
      await release(r.insertId);
    },
    'one INSERT … VALUES into the log (no test at all) + release': async () => {
      const [r] = (await c.query(
        `INSERT INTO db_lock_log (${cols}) VALUES ('h', 'write', '${randomUUID()}', 'h:1', 1, 'lease', ${++sharedTokens}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`,
      )) as unknown as [Ok];
      await release(r.insertId);
    },
    'holder on the key row (one UPDATE) + release writing the audit row by trigger': async () => {
      const owner = randomUUID();
      const [g] = await heldGrant('t', owner);
      if (g.affectedRows !== 1) throw new Error('not granted');
      await c.query(`UPDATE db_lock_held SET owner = NULL, end_status = 'RELEASED' WHERE lock_key = 't' AND owner = '${owner}'`);
    },
    'holder on the key row (one UPDATE) + release: UPDATE and INSERT in one transaction': async () => {
      const owner = randomUUID();
      const [g] = await heldGrant('x', owner);
      if (g.affectedRows !== 1) throw new Error('not granted');
      await c.query(
        `START TRANSACTION; INSERT INTO db_lock_log (${cols}, ended_at, hold_ms) SELECT lock_key, 'write', owner, holder, process_id, 'lease', fencing_token, 'RELEASED', lease_ms, acquired_at, expires_at, wait_ms, UTC_TIMESTAMP(6), 0 FROM db_lock_held WHERE lock_key = 'x' AND owner = '${owner}' FOR UPDATE; ` +
          `UPDATE db_lock_held SET owner = NULL WHERE lock_key = 'x' AND owner = '${owner}'; COMMIT`,
      );
    },
    'full plan (refusal path) + release': async () => {
      const plan = singleKeyGrantPlan(input('full'));
      const [results] = (await c.query(plan.statements.join(';\n'))) as unknown as [unknown[]];
      const outcome = plan.parse(results);
      if (!outcome.granted) throw new Error(`not granted: ${JSON.stringify(outcome)}`);
      await release(outcome.rows[0]!.id);
    },
  };
  for (const fn of Object.values(shapes)) for (let i = 0; i < 20; i++) await fn();
  const results = await timeShapes(shapes, Number(process.argv[2] ?? 300), { rounds: 5 });
  const floor = results['two pk updates']!;
  for (const [name, m] of Object.entries(results)) {
    const ratios = m.map((x, i) => x / floor[i]!);
    console.log(
      `${name.padEnd(40)} ${median(m).toFixed(3)} ms  ${median(ratios).toFixed(2)}x two PK updates (rounds ${ratios.map((x) => x.toFixed(2)).join(' ')})`,
    );
  }
  await c.end();
  await db.drop();
}

runProbe(main);
