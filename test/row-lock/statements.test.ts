import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { spyOnDataSourceStatements, statementShapes } from '../support/statement-spy.js';

/**
 * What one uncontended row-lock hold sends, statement by statement: its transaction's opening and
 * the locking UPDATE that bumps the token (one CALL of the begin-and-take routine where it is
 * installed), the work, the audit row INSERT and COMMIT (one CALL of the record-and-commit
 * routine), all on the business transaction's connection; nothing on the library's own pool.
 * Counted from what mysql2 sends on the DataSource's connections and the library's caller round
 * trips (the janitor is off; the watchdog holds nothing, so it sends nothing). The routines refused
 * or dropped: session-routines.test.ts.
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
    return { statements: statementShapes(sent, from), libraryTrips: callerTrips(locks) - trips };
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
});
