import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { killSession, sessionIdSql } from '../support/server-sessions.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * README: "a killed connection: ... its next statement or commit fails with LockLostError";
 * "Callers see only DbLockError subclasses". A row-lock taken inside an open row-lock transaction
 * waits in the server on that transaction's connection: when that connection is killed (or cut at
 * maxHoldMs) the nested call must fail typed, not with mysql2's raw error.
 */
contractSuite(
  'holder-connection',
  'row-lock nested take waiting in the server when its transaction connection dies',
  { postgres: true },
  (target) => {
    if (target.strategy !== 'row-lock') return;
    let db: TestDatabase;
    let a: { app: INestApplicationContext; locks: LockService };
    let b: { app: INestApplicationContext; locks: LockService };

    before(async () => {
      db = await TestDatabase.forTarget(target);
      a = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
      b = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    });
    after(async () => {
      await a?.app.close();
      await b?.app.close();
      await db?.drop();
    });

    it('the outer connection KILLed while its nested take waits in the server: the nested call and the outer call fail with LockLostError', async () => {
      const held = await b.locks.acquire('nk:busy');
      let nested: unknown;
      const outer = a.locks
        .runLocked('nk:outer', async () => {
          const [row] = (await a.locks.manager.query(sessionIdSql(db))) as { id: number }[];
          const id = Number(row!.id);
          const p = a.locks.runLocked('nk:busy', async () => 'ran', { timeoutMs: 4_000 }).catch((error: unknown) => error);
          await new Promise((r) => setTimeout(r, 300));
          await killSession(db, id);
          nested = await p;
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      const outerError = await outer;
      await held.release();
      assert.ok(outerError instanceof LockLostError, `outer: ${String(outerError)}`);
      assert.ok(nested instanceof DbLockError, `nested: not typed: ${String(nested)} ${(nested as Error)?.constructor?.name}`);
      assert.ok(nested instanceof LockLostError, `nested: ${String(nested)}`);
      assert.ok(outerError instanceof LockLostError, `outer: ${String(outerError)}`);
    });

    it('maxHoldMs of the outer hold passes while its nested take waits in the server: the nested call fails typed (LockLostError)', async () => {
      const c = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false, maxHoldMs: 500 });
      const held = await b.locks.acquire('mh:busy');
      let nested: unknown;
      try {
        await c.locks
          .runLocked('mh:outer', async () => {
            nested = await c.locks.runLocked('mh:busy', async () => 'ran', { timeoutMs: 4_000 }).catch((error: unknown) => error);
          })
          .catch(() => undefined);
      } finally {
        await held.release();
        await c.app.close();
      }
      assert.ok(nested instanceof DbLockError, `nested: not typed: ${String(nested)}`);
      assert.ok(nested instanceof LockLostError, `nested: ${String(nested)}`);
    });
  },
);
