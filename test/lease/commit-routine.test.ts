import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockLostError, LockService, WriteLock } from '../../lib/index.js';
import { END_AND_COMMIT as COMMIT_ROUTINE } from '../../lib/store/mysql/session-routines.sql.js';
import { createLockApp } from '../support/lock-app.js';
import { spyOnDataSourceStatements } from '../support/statement-spy.js';
import { TestDatabase } from '../support/test-database.js';

let db: TestDatabase;

@Injectable()
class Ledger {
  constructor(readonly locks: LockService) {}

  /**
   * Adds to a balance. `takenOver`: after the write, another session ends this lock's log row as a
   * takeover would (committed, and without telling this process), so only the fence can see it.
   */
  @WriteLock('ledger:{0}')
  async post(account: number, cents: number, takenOver = false): Promise<number> {
    await this.locks.manager.query('UPDATE balances SET cents = cents + ? WHERE account = ?', [cents, account]);
    const token = this.locks.currentLock!.fencingToken;
    if (takenOver) {
      await db.query(`UPDATE db_lock_log SET status = 'EXPIRED', ended_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND fencing_token = ?`, [
        Buffer.from(`ledger:${account}`),
        token,
      ]);
    }
    return token;
  }
}

/**
 * The fence and COMMIT of a decorated call that ends one lock of one key go to the server as one
 * CALL of the fenced-commit routine when the migration installed it, and as the fence UPDATE and
 * COMMIT otherwise. Either way a lock taken over before the commit commits nothing: the routine
 * must refuse to COMMIT when its UPDATE found the row no longer live.
 */
contractSuite('lease-mechanics', 'lease: the fenced commit in one CALL', (target) => {
  for (const routine of [true, false]) {
    describe(`lease: fenced commit ${routine ? 'through the routine (one round trip)' : 'without the routine (fence UPDATE, then COMMIT)'}`, () => {
      let app: INestApplicationContext;
      let ledger: Ledger;
      let sent: string[] = [];
      before(async () => {
        db = await TestDatabase.create();
        if (!routine) await db.query(`DROP PROCEDURE \`${COMMIT_ROUTINE}\``);
        await db.query('CREATE TABLE balances (account INT PRIMARY KEY, cents BIGINT NOT NULL)');
        await db.query('INSERT INTO balances VALUES (1, 0)');
        ({ app } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 30_000 }), { providers: [Ledger] }));
        ledger = app.get(Ledger);
        ({ sent } = spyOnDataSourceStatements(app.get(DataSource)));
        await ledger.post(1, 0); // first use of the key: its row exists from now on
      });
      after(async () => {
        await app?.close();
        await db?.drop();
      });

      /** The statements a call sent on the DataSource, by their first word (CALL with the routine's name). */
      async function statementsOf(call: () => Promise<unknown>): Promise<string[]> {
        const from = sent.length;
        await call().catch(() => undefined);
        return sent.slice(from).map((sql) => (sql.startsWith('CALL') ? sql.slice(0, sql.indexOf('(')) : sql.split(/\s+/)[0]!));
      }

      it('a decorated call commits its work and ends its lock RELEASED', async () => {
        const statements = await statementsOf(() => ledger.post(1, 500));
        const end = routine ? [`CALL \`${COMMIT_ROUTINE}\``] : ['UPDATE', 'COMMIT'];
        assert.deepEqual(statements.slice(-(end.length + 1)), ['UPDATE', ...end], statements.join(' | '));
        assert.deepEqual(await db.query('SELECT cents FROM balances WHERE account = 1'), [{ cents: 500 }]);
        const rows = await db.logRows('ledger:1');
        assert.equal(rows.at(-1)!.status, 'RELEASED');
      });

      it('a lock taken over before the commit: LockLostError, the work rolled back, the row left as the takeover wrote it', async () => {
        let error: unknown;
        const statements = await statementsOf(() => ledger.post(1, 700, true).catch((e: unknown) => Promise.reject((error = e))));
        assert.ok(error instanceof LockLostError, `LockLostError, got ${String(error)}`);
        assert.match((error as Error).message, /took the key over/);
        assert.ok(statements.includes(routine ? `CALL \`${COMMIT_ROUTINE}\`` : 'ROLLBACK'), statements.join(' | '));
        assert.ok(!statements.includes('COMMIT'), `no COMMIT was sent: ${statements.join(' | ')}`);
        assert.deepEqual(await db.query('SELECT cents FROM balances WHERE account = 1'), [{ cents: 500 }], 'the work was rolled back');
        const rows = await db.logRows('ledger:1');
        assert.equal(rows.at(-1)!.status, 'EXPIRED');
        // The key is usable again and its connection is clean (no transaction left open on it).
        assert.equal(typeof (await ledger.post(1, 1)), 'number');
        assert.deepEqual(await db.query('SELECT cents FROM balances WHERE account = 1'), [{ cents: 501 }]);
      });

      if (routine)
        it('the routine dropped while the app runs: the refused CALL changed nothing, the fence and COMMIT go apart from then on', async () => {
          await db.query(`DROP PROCEDURE \`${COMMIT_ROUTINE}\``);
          const first = await statementsOf(() => ledger.post(1, 10));
          assert.deepEqual(first.slice(-4), ['UPDATE', `CALL \`${COMMIT_ROUTINE}\``, 'UPDATE', 'COMMIT'], first.join(' | '));
          const next = await statementsOf(() => ledger.post(1, 10));
          assert.deepEqual(next.slice(-3), ['UPDATE', 'UPDATE', 'COMMIT'], next.join(' | '));
          assert.deepEqual(await db.query('SELECT cents FROM balances WHERE account = 1'), [{ cents: 521 }]);
          assert.deepEqual(
            (await db.logRows('ledger:1')).slice(-2).map((row) => row.status),
            ['RELEASED', 'RELEASED'],
          );
        });
    });
  }
});
