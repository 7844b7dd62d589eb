import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * What one uncontended row-lock hold sends, statement by statement: its transaction's opening,
 * the locking UPDATE that bumps the token, the work, the audit row INSERT and COMMIT, all on the
 * business transaction's connection; nothing on the library's own pool. Counted from TypeORM's
 * query log of the DataSource and the library's caller round trips (the janitor is off; the
 * watchdog holds nothing, so it sends nothing).
 */
contractSuite('row-lock-statements', 'row-lock: statements per hold', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  const sent: string[] = [];
  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE counter (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB');
    await db.query('INSERT INTO counter VALUES (1, 0)');
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }));
    const logger = app.get(DataSource).logger as unknown as { logQuery: (query: string, ...rest: unknown[]) => unknown };
    const original = logger.logQuery.bind(logger);
    logger.logQuery = (query: string, ...rest: unknown[]) => {
      sent.push(query);
      return original(query, ...rest);
    };
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
      statements: sent
        .slice(from)
        .map((sql) => sql.replace(/^SET STATEMENT .*? FOR /s, '').replace(/^(SET TRANSACTION ISOLATION LEVEL \S+ \S+|\S+( INTO \S+)?).*$/s, '$1')),
      libraryTrips: callerTrips(locks) - trips,
    };
  }

  it('withLock with an empty fn: 5 statements, all on the business transaction', async () => {
    await locks.withLock('hold', () => undefined); // first use creates the key row
    const { statements, libraryTrips } = await count(() => locks.withLock('hold', () => undefined));
    assert.deepEqual(statements, ['SET TRANSACTION ISOLATION LEVEL READ COMMITTED', 'START', 'UPDATE', 'INSERT INTO db_lock_log', 'COMMIT']);
    assert.equal(libraryTrips, 0);
  });

  it('runLocked with one UPDATE: that UPDATE is the only statement added', async () => {
    await locks.runLocked('decorated', async () => undefined);
    const { statements, libraryTrips } = await count(() =>
      locks.runLocked('decorated', async () => {
        await locks.manager.query('UPDATE counter SET v = v + 1 WHERE id = 1');
      }),
    );
    assert.deepEqual(statements, [
      'SET TRANSACTION ISOLATION LEVEL READ COMMITTED',
      'START',
      'UPDATE',
      'UPDATE',
      'INSERT INTO db_lock_log',
      'COMMIT',
    ]);
    assert.equal(libraryTrips, 0);
    assert.equal((await db.query<{ v: number }[]>('SELECT v FROM counter'))[0]!.v, 1);
  });
});
