import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * README: a row-lock taken inside an open transaction whose wait "ends in a deadlock with another
 * holder": the database rolled back the whole transaction, "the call throws LockLostError ..., the
 * transaction's session is cut and every lock ending with it is lost, so nothing of it commits".
 * Here the deadlock hits the nested take's creation of a new key's row (first use) inside the
 * outer transaction.
 */
contractSuite('holder-connection', 'row-lock nested first use deadlocked while creating its key row', (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  let b: { app: INestApplicationContext; locks: LockService };
  let c: { app: INestApplicationContext; locks: LockService };

  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL) ENGINE=InnoDB');
    await db.query('INSERT INTO account VALUES (1, 100)');
    b = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    c = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
  });
  after(async () => {
    await b?.app.close();
    await c?.app.close();
    await db?.drop();
  });

  it('the victim nested call throws LockLostError and nothing of its outer transaction commits', async () => {
    const heavy = Array.from({ length: 12 }, (_, i) => `a:${String(i).padStart(2, '0')}`);
    await (await b.locks.acquire([...heavy, 'zz:outer', 'n:low', 'z:high'])).release();
    let nested: unknown;
    let multi: Promise<unknown> | undefined;
    const outer = await c.locks
      .runLocked('zz:outer', async () => {
        await c.locks.manager.query('UPDATE account SET balance = balance + 1 WHERE id = 1');
        // b: bumps 12 rows, takes a gap lock for the missing 'r:new', then waits for 'zz:outer' (ours).
        multi = b.locks.acquire([...heavy, 'r:new', 'zz:outer'], { timeoutMs: 6_000 }).then(
          async (h) => void (await h.release()),
          (e: unknown) => e,
        );
        await sleep(400);
        // Our nested first use of 's:fresh' (same gap): its key row insert waits for b's gap lock: a cycle.
        nested = await c.locks.runLocked('s:fresh', async () => 'ran', { timeoutMs: 4_000 }).catch((error: unknown) => error);
        // The work goes on after a failed nested call (caught): this write must not commit.
        await c.locks.manager.query('UPDATE account SET balance = balance + 1000 WHERE id = 1');
      })
      .then(
        () => 'committed',
        (error: unknown) => error,
      );
    await multi;
    const [row] = await db.query<{ balance: number }[]>('SELECT balance FROM account WHERE id = 1');
    const balance = Number(row!.balance);
    // All of the outer work committed under its lock, or none of it (LockLostError): never a part.
    assert.ok(
      (outer === 'committed' && balance === 1101) || (outer instanceof LockLostError && balance === 100),
      `outer: ${String(outer)}, balance ${balance} (100 before; +1 before the nested call, +1000 after); nested: ${String(nested)}`,
    );
    assert.ok(nested instanceof LockLostError || nested === 'ran', `nested: ${String(nested)}`);
  });
});
