/**
 * Development probe: what a row-lock hold's lock statements cost on the business connection, by
 * hand on one connection without multi-statements (as the app's DataSource has it), interleaved op
 * by op: a plain transaction with one UPDATE; the library's shape (CALL begin-and-take; the UPDATE;
 * CALL record-and-commit); the same statements sent one by one.
 * `node build/test/bench/probe-row-commit.js [ops]`
 */
import 'reflect-metadata';
import type mysql from 'mysql2/promise';
import { probeShapesOnOneConnection, runProbe } from './probe-main.js';
import { BEGIN_AND_TAKE, RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';

async function shapesOf(c: mysql.Connection): Promise<Record<string, () => Promise<unknown>>> {
  await c.query("INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES ('k', 0, 1)");
  const audit = (token: number) =>
    `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note) ` +
    `VALUES ('k', 'write', '00000000-0000-0000-0000-000000000000', 'probe', 'row-lock', ${token}, 'RELEASED', 0, UTC_TIMESTAMP(6) - INTERVAL 300 MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 0, 0, NULL)`;
  await c.query('CREATE TABLE audit_lite LIKE db_lock_log');
  for (const row of (
    await c.query(
      "SELECT DISTINCT INDEX_NAME AS i FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'audit_lite' AND INDEX_NAME <> 'PRIMARY'",
    )
  )[0] as { i: string }[])
    await c.query(`ALTER TABLE audit_lite DROP INDEX \`${row.i}\``);
  const record = (token: number) =>
    `CALL \`${RECORD_AND_COMMIT}\`('k', 'write', '00000000-0000-0000-0000-000000000000', 'probe', ${token}, 300, 0, 0)`;
  /** The begin-and-take routine, then the work's UPDATE: the token. */
  const takeByCallThenUpdate = async (prefix = ''): Promise<number> => {
    const [rows] = (await c.query(`${prefix}CALL \`${BEGIN_AND_TAKE}\`('k')`)) as unknown as [[{ token: number }[]]];
    await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
    return rows[0]![0]!.token;
  };
  /** START, the locking UPDATE sent apart, then the work's UPDATE: the token. */
  const startTakeThenUpdate = async (): Promise<number> => {
    await c.query('START TRANSACTION');
    const [r] = (await c.query(
      "UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = 'k' AND no_lease_holders = 1",
    )) as unknown as [{ insertId: number }];
    await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
    return r.insertId;
  };
  const shapes: Record<string, () => Promise<unknown>> = {
    'plain: START; UPDATE; COMMIT': async () => {
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query('COMMIT');
    },
    'CALL take; UPDATE; CALL record': async () => {
      await c.query(record(await takeByCallThenUpdate()));
    },
    'bounded CALL take; UPDATE; CALL record': async () => {
      await c.query(record(await takeByCallThenUpdate('SET STATEMENT max_statement_time = 120.000 FOR ')));
    },
    'CALL take; UPDATE; INSERT lite; COMMIT': async () => {
      await c.query(audit(await takeByCallThenUpdate()).replace('db_lock_log', 'audit_lite'));
      await c.query('COMMIT');
    },
    'START; take; UPDATE; INSERT; COMMIT': async () => {
      await c.query(audit(await startTakeThenUpdate()));
      await c.query('COMMIT');
    },
    'CALL take; UPDATE; INSERT; COMMIT': async () => {
      await c.query(audit(await takeByCallThenUpdate()));
      await c.query('COMMIT');
    },
    'START; take; UPDATE; CALL record': async () => {
      await c.query(record(await startTakeThenUpdate()));
    },
  };
  return shapes;
}

runProbe(() =>
  probeShapesOnOneConnection(
    'dblock_rowcommit',
    Number(process.argv[2] ?? 1000),
    { multipleStatements: false },
    'plain: START; UPDATE; COMMIT',
    shapesOf,
  ),
);
