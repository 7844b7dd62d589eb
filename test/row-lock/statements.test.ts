import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import mysql from 'mysql2/promise';
import { AddBeginAndTakeRoutine1797552000000, DbLockError, type LockService, LockTimeoutError } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { spyOnDataSourceStatements } from '../support/statement-spy.js';

/**
 * What one uncontended row-lock hold sends, statement by statement: its transaction's opening and
 * the locking UPDATE that bumps the token (one CALL of the begin-and-take routine where it is
 * installed), the work, the audit row INSERT and COMMIT (one CALL of the record-and-commit
 * routine), all on the business transaction's
 * connection; nothing on the library's own pool. Counted from what mysql2 sends on the
 * DataSource's connections and the library's caller round trips (the janitor is off; the watchdog
 * holds nothing, so it sends nothing).
 */
contractSuite('row-lock-statements', 'row-lock: statements per hold', () => {
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
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Statements `call` sent on the DataSource, as their first words, and round trips on the library's pool. */
  async function count(call: () => Promise<unknown>): Promise<{ statements: string[]; libraryTrips: number }> {
    const from = sent.length;
    const trips = callerTrips(locks);
    await call();
    return {
      // A bounded wait rides in the statement itself (MariaDB `SET STATEMENT … FOR`): still one statement.
      statements: sent.slice(from).map((sql) =>
        sql
          .replace(/^SET STATEMENT .*? FOR /s, '')
          .replace(/^CALL `(\w+)`\(.*$/s, 'CALL $1')
          .replace(/^(SET TRANSACTION ISOLATION LEVEL \S+ \S+|CALL \w+|\S+( INTO \S+)?).*$/s, '$1'),
      ),
      libraryTrips: callerTrips(locks) - trips,
    };
  }

  it('withLock with an empty fn: 2 statements, both on the business transaction (START and the locking UPDATE in one CALL, the audit row and COMMIT in another)', async () => {
    await locks.withLock('hold', () => undefined); // first use creates the key row
    const { statements, libraryTrips } = await count(() => locks.withLock('hold', () => undefined));
    assert.deepEqual(statements, ['CALL db_lock_begin_and_take_v1', 'CALL db_lock_record_and_commit_v1']);
    assert.equal(libraryTrips, 0);
  });

  it('runLocked with one UPDATE: that UPDATE is the only statement added', async () => {
    await locks.runLocked('decorated', async () => undefined);
    const { statements, libraryTrips } = await count(() =>
      locks.runLocked('decorated', async () => {
        await locks.manager.query('UPDATE counter SET v = v + 1 WHERE id = 1');
      }),
    );
    assert.deepEqual(statements, ['CALL db_lock_begin_and_take_v1', 'UPDATE', 'CALL db_lock_record_and_commit_v1']);
    assert.equal(libraryTrips, 0);
    assert.equal((await db.query<{ v: number }[]>('SELECT v FROM counter'))[0]!.v, 1);
  });

  it('an isolation level named by the caller costs the one statement that sets it', async () => {
    await locks.runLocked('isolated', async () => undefined);
    const { statements } = await count(() => locks.runLocked('isolated', async () => undefined, { isolationLevel: 'READ COMMITTED' }));
    assert.deepEqual(statements, ['SET TRANSACTION ISOLATION LEVEL READ COMMITTED', 'START', 'UPDATE', 'CALL db_lock_record_and_commit_v1']);
  });

  it("after a lease grant on the key, one row-lock reads the log (rows locked first, then one round trip on the library's pool); the next is one UPDATE again", async () => {
    await locks.withLock('mixed', () => undefined);
    await locks.withLock('mixed', () => undefined, { strategy: 'lease' });
    const checked = await count(() => locks.withLock('mixed', () => undefined));
    assert.deepEqual(checked.statements, ['CALL db_lock_begin_and_take_v1', 'SELECT', 'UPDATE', 'CALL db_lock_record_and_commit_v1']);
    assert.equal(checked.libraryTrips, 1);
    const fast = await count(() => locks.withLock('mixed', () => undefined));
    assert.deepEqual(fast.statements, ['CALL db_lock_begin_and_take_v1', 'CALL db_lock_record_and_commit_v1']);
    assert.equal(fast.libraryTrips, 0);
    assert.deepEqual(
      (await db.logRows('mixed')).map((r) => [Number(r.fencing_token), r.strategy]),
      [
        [1, 'row-lock'],
        [2, 'lease'],
        [3, 'row-lock'],
        [4, 'row-lock'],
      ],
    );
  });

  it('a nested row-lock on a new key inside an open row-lock transaction creates its row in that transaction', async () => {
    // At REPEATABLE READ the outer transaction's miss holds a gap lock on the new key: a row created
    // on another connection would wait for it (innodb_lock_wait_timeout) and fail.
    const started = performance.now();
    const tokens = await locks.runLocked('joined-outer', async () => {
      const inner = await locks.runLocked('joined-new-key', async () => locks.currentLock!.fencingToken);
      return [locks.currentLock!.fencingToken, inner];
    });
    assert.deepEqual(tokens, [1, 1]);
    assert.ok(performance.now() - started < 900, `took ${Math.round(performance.now() - started)} ms: a wait on its own gap lock`);
    const [row] = await db.query<{ fencing_token: string }[]>(`SELECT fencing_token FROM db_lock WHERE lock_key = 'joined-new-key'`);
    assert.equal(Number(row!.fencing_token), 1);
    assert.deepEqual(
      (await db.logRows('joined-new-key')).map((r) => [Number(r.fencing_token), r.status]),
      [[1, 'RELEASED']],
    );
  });

  it("a TypeORM subscriber to transaction events hears the hold's transaction start and commit (then TypeORM opens and commits it)", async () => {
    const dataSource = app.get(DataSource);
    const heard: string[] = [];
    const subscriber = {
      afterTransactionStart: () => void heard.push('start'),
      afterTransactionCommit: () => void heard.push('commit'),
    };
    dataSource.subscribers.push(subscriber);
    try {
      const { statements } = await count(() => locks.withLock('hold', () => undefined));
      assert.deepEqual(heard, ['start', 'commit']);
      assert.deepEqual(statements, ['START', 'UPDATE', 'INSERT INTO db_lock_log', 'COMMIT']);
    } finally {
      dataSource.subscribers.splice(dataSource.subscribers.indexOf(subscriber), 1);
    }
  });

  it("with no subscriber to transaction events (the library's escaped-write guard listens to queries only), the hold's statements go past TypeORM's query wrapper", async () => {
    const logger = app.get(DataSource).logger as unknown as { logQuery: (query: string, ...rest: unknown[]) => unknown };
    const original = logger.logQuery;
    const logged: string[] = [];
    logger.logQuery = (query: string, ...rest: unknown[]) => {
      logged.push(query);
      return original.call(logger, query, ...rest);
    };
    try {
      const { statements } = await count(() => locks.withLock('hold', () => undefined));
      assert.deepEqual(statements, ['CALL db_lock_begin_and_take_v1', 'CALL db_lock_record_and_commit_v1']);
      assert.deepEqual(logged, [], 'TypeORM logged none of them');
    } finally {
      logger.logQuery = original;
    }
  });

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
      assert.deepEqual(
        fresh.map((sql) =>
          sql
            .replace(/^SET STATEMENT .*? FOR /s, '')
            .replace(/^CALL `(\w+)`\(.*$/s, 'CALL $1')
            .replace(/^(CALL \w+|\S+( INTO \S+)?).*$/s, '$1'),
        ),
        ['CALL db_lock_begin_and_take_v1', 'INSERT INTO db_lock_log', 'COMMIT'],
      );
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
