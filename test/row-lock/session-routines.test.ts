import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import mysql from 'mysql2/promise';
import { AddBeginAndTakeRoutine1797552000000, DbLockError, type LockService, LockTimeoutError } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { spyOnDataSourceStatements, statementShapes } from '../support/statement-spy.js';

/**
 * A row-lock hold's two session routines (begin-and-take; record-and-commit) when the server
 * refuses what runs inside them, or when they are dropped while the app runs: nothing half done is
 * committed or left open, the caller gets a typed error, and the holds go on with the statements
 * sent apart. The tests run in order: the routines are dropped one after the other, then the
 * migration installs the begin-and-take routine again.
 */
contractSuite('row-lock-statements', 'row-lock: its session routines refused or dropped', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let sent: string[] = [];
  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE counter (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB');
    await db.query('INSERT INTO counter VALUES (1, 0)');
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }));
    ({ sent } = spyOnDataSourceStatements(app.get(DataSource)));
    await locks.withLock('hold', () => undefined); // first use creates the key row
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Statements `call` sent on the DataSource, as their first words. */
  async function count(call: () => Promise<unknown>): Promise<{ statements: string[] }> {
    const from = sent.length;
    await call();
    return { statements: statementShapes(sent, from) };
  }

  it('an audit row the server refuses inside the routine: nothing is committed, a typed error, the hold ends FAILED', async () => {
    // A trigger refuses this key's RELEASED audit row: the routine stops before its COMMIT.
    await db.query(
      "CREATE TRIGGER refuse_audit BEFORE INSERT ON db_lock_log FOR EACH ROW BEGIN IF NEW.lock_key = 'refused' AND NEW.status = 'RELEASED' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit refused'; END IF; END",
    );
    try {
      await locks.withLock('refused', () => undefined).catch(() => undefined); // first use: its key row is created
      for (const call of [
        () => locks.runLocked('refused', async () => void (await locks.manager.query('UPDATE counter SET v = v + 100 WHERE id = 1'))),
        () => locks.withLock('refused', async (lock) => void (await lock.manager!.query('UPDATE counter SET v = v + 100 WHERE id = 1'))),
      ]) {
        const before = (await db.query<{ v: number }[]>('SELECT v FROM counter'))[0]!.v;
        const { statements } = await count(() =>
          call().then(
            () => assert.fail('the call succeeded'),
            (error: unknown) => {
              assert.ok(error instanceof DbLockError, `a typed error, got ${String(error)}`);
              assert.match(String((error as Error).cause), /audit refused/);
            },
          ),
        );
        assert.ok(statements.includes('CALL db_lock_record_and_commit_v1'), statements.join(' | '));
        assert.ok(!statements.includes('COMMIT'), statements.join(' | '));
        assert.equal((await db.query<{ v: number }[]>('SELECT v FROM counter'))[0]!.v, before, 'the work was not committed');
      }
      await eventually(async () => (await db.logRows('refused')).filter((r) => r.status === 'FAILED').length === 3, 5_000, 'FAILED rows');
      assert.deepEqual(
        (await db.logRows('refused')).map((r) => r.status),
        ['FAILED', 'FAILED', 'FAILED'],
      );
    } finally {
      await db.query('DROP TRIGGER refuse_audit');
    }
  });

  it('the routine dropped while the app runs: the refused CALL changed nothing, the INSERT and COMMIT go apart from then on', async () => {
    await db.query('DROP PROCEDURE db_lock_record_and_commit_v1');
    const first = await count(() => locks.withLock('hold', () => undefined));
    assert.deepEqual(first.statements, ['CALL db_lock_begin_and_take_v1', 'CALL db_lock_record_and_commit_v1', 'INSERT INTO db_lock_log', 'COMMIT']);
    const next = await count(() => locks.withLock('hold', () => undefined));
    assert.deepEqual(next.statements, ['CALL db_lock_begin_and_take_v1', 'INSERT INTO db_lock_log', 'COMMIT']);
    const rows = await db.logRows('hold');
    assert.deepEqual(
      rows.slice(-2).map((r) => r.status),
      ['RELEASED', 'RELEASED'],
    );
    assert.equal(Number(rows.at(-1)!.fencing_token), Number(rows.at(-2)!.fencing_token) + 1);
  });

  it('a wait that runs out inside the begin-and-take routine: LockTimeoutError, and the transaction it opened is rolled back before its connection goes back to the pool', async () => {
    await locks.withLock('waited', () => undefined); // first use creates the key row
    const holder = await mysql.createConnection(db.settings);
    try {
      await holder.query('START TRANSACTION');
      await holder.query(`SELECT fencing_token FROM db_lock WHERE lock_key = 'waited' FOR UPDATE`);
      const { statements } = await count(() =>
        assert.rejects(
          locks.withLock('waited', () => assert.fail('granted while the row is locked'), { timeoutMs: 300 }),
          LockTimeoutError,
        ),
      );
      assert.equal(statements[0], 'CALL db_lock_begin_and_take_v1', statements.join(' | '));
      // The CALL's START ran, its UPDATE waited and gave up: no transaction may still be open on a
      // connection of the DataSource's pool. (The library's own pool may briefly write the
      // acquisition's terminal row meanwhile: not a leak, so not counted.)
      // Read until no pooled connection shows one: a leaked one stays listed.
      const pooled = dataSourceThreadIds(app.get(DataSource));
      assert.ok(pooled.size > 0, 'the DataSource pool has connections to look at');
      const open = await db.transactionsUntil((them) => !them.some((t) => pooled.has(t.threadId)));
      assert.deepEqual(
        open.map((t) => t.threadId).filter((id) => pooled.has(id)),
        [],
        'a transaction of the timed-out caller was left open on a pooled connection',
      );
      assert.ok(
        open.some((t) => t.threadId === holder.threadId),
        "the holder's transaction is seen (else the check looks at nothing)",
      );
    } finally {
      await holder.end();
    }
    assert.equal(await locks.withLock('waited', (lock) => lock.fencingToken), 2);
  });

  it('the begin-and-take routine dropped while the app runs: the refused CALL opened nothing, START and the UPDATE go apart from then on', async () => {
    await db.query('DROP PROCEDURE db_lock_begin_and_take_v1');
    const before = Number((await db.logRows('hold')).at(-1)!.fencing_token);
    const first = await count(() => locks.withLock('hold', () => undefined));
    assert.deepEqual(first.statements, ['CALL db_lock_begin_and_take_v1', 'START', 'UPDATE', 'INSERT INTO db_lock_log', 'COMMIT']);
    const next = await count(() => locks.withLock('hold', () => undefined));
    assert.deepEqual(next.statements, ['START', 'UPDATE', 'INSERT INTO db_lock_log', 'COMMIT']);
    assert.deepEqual(
      (await db.logRows('hold')).slice(-2).map((r) => [Number(r.fencing_token), r.status]),
      [
        [before + 1, 'RELEASED'],
        [before + 2, 'RELEASED'],
      ],
    );
  });

  it('the migration installs the dropped routine again (twice: the second run changes nothing); an app started after it takes with the CALL again; down drops it', async () => {
    const migration = new AddBeginAndTakeRoutine1797552000000();
    const runner = { query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never;
    const installed = async (): Promise<number> =>
      Number(
        (
          await db.query<{ n: number }[]>(
            "SELECT COUNT(*) AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'db_lock_begin_and_take_v1'",
          )
        )[0]!.n,
      );
    await migration.up(runner);
    await migration.up(runner);
    assert.equal(await installed(), 1);
    const started = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    try {
      const { sent: fresh } = spyOnDataSourceStatements(started.app.get(DataSource));
      const before = Number((await db.logRows('hold')).at(-1)!.fencing_token);
      assert.equal(await started.locks.withLock('hold', (lock) => lock.fencingToken), before + 1);
      // The record-and-commit routine is still dropped (above): its INSERT and COMMIT go apart.
      assert.deepEqual(statementShapes(fresh), ['CALL db_lock_begin_and_take_v1', 'INSERT INTO db_lock_log', 'COMMIT']);
    } finally {
      await started.app.close();
    }
    await migration.down(runner);
    assert.equal(await installed(), 0);
  });
});

/** Thread ids of the connections in the DataSource's mysql2 pool (busy or idle). */
function dataSourceThreadIds(dataSource: DataSource): Set<number> {
  const pool = (dataSource.driver as unknown as { pool?: { _allConnections?: { toArray?: () => { threadId: number }[] } } }).pool;
  return new Set((pool?._allConnections?.toArray?.() ?? []).map((connection) => connection.threadId));
}
