import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { killSession, sessionIdSql } from '../support/server-sessions.js';
import { TestDatabase } from '../support/test-database.js';

type App = { app: INestApplicationContext; locks: LockService };

contractSuite('multi-key', 'mixed-mode multi-key, maxHoldMs, killed connection (coverage)', { postgres: true }, (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  const apps: App[] = [];
  const start = async (options: Record<string, unknown>, poolSize?: number): Promise<App> => {
    const a = await createLockApp(db.settings, { janitor: false, strategy: 'row-lock', ...options }, { poolSize });
    apps.push(a);
    return a;
  };
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    for (const a of apps) await a.app.close();
    await db?.drop();
  });

  it('mixed-mode multi-key requests in 3 apps: no overlap, no error', async () => {
    const a = await start({}, 6);
    const b = await start({}, 6);
    const c = await start({}, 6);
    const keys = ['mk:a', 'mk:b', 'mk:c'];
    const readers = new Map<string, number>();
    const writers = new Map<string, number>();
    const violations: string[] = [];
    const errors: unknown[] = [];
    let done = 0;
    const loop = async (app: App, seed: number): Promise<void> => {
      for (let i = 0; i < 60; i++) {
        const req = keys
          .filter((_, j) => (seed + i + j) % 4 !== 0)
          .map((key, j) => ({ key, mode: ((seed * 7 + i + j) % 3 === 0 ? 'write' : 'read') as 'read' | 'write' }));
        if (req.length === 0) continue;
        try {
          await app.locks.withLock(
            req,
            async () => {
              for (const t of req) {
                if (t.mode === 'write') {
                  if ((readers.get(t.key) ?? 0) > 0 || (writers.get(t.key) ?? 0) > 0) violations.push(`w ${t.key}`);
                  writers.set(t.key, (writers.get(t.key) ?? 0) + 1);
                } else {
                  if ((writers.get(t.key) ?? 0) > 0) violations.push(`r ${t.key}`);
                  readers.set(t.key, (readers.get(t.key) ?? 0) + 1);
                }
              }
              await new Promise((r) => setTimeout(r, 1));
              for (const t of req) {
                const m = t.mode === 'write' ? writers : readers;
                m.set(t.key, m.get(t.key)! - 1);
              }
            },
            { timeoutMs: 10_000 },
          );
          done++;
        } catch (e) {
          errors.push(e);
        }
      }
    };
    await Promise.all([a, b, c, a, b, c].map((app, i) => loop(app, i)));
    assert.deepEqual(violations, []);
    assert.deepEqual(errors.map(String), []);
    assert.ok(done > 0);
  });

  it('maxHoldMs on a reader: signal aborts, writer gets in, audit row written', async () => {
    const a = await start({ maxHoldMs: 300 });
    const b = await start({});
    const key = 'mh-r';
    await (await b.locks.acquire(key)).release();
    const r = await a.locks.acquire(key, { mode: 'read' });
    const t0 = performance.now();
    const w = await b.locks.acquire(key, { timeoutMs: 5_000 });
    const waited = performance.now() - t0;
    assert.ok(r.signal.aborted, 'reader signal aborted');
    const rel = await r.release().then(
      () => null,
      (e: unknown) => e,
    );
    await w.release();
    await eventually(async () => (await db.logRows(key)).length >= 3, 3_000, 'rows');
    const rows = await db.logRows(key);
    assert.ok(waited < 1_500, `writer waited ${waited}`);
    assert.deepEqual(
      rows.map((x) => [x.mode, x.status, Number(x.fencing_token)]).sort((p, q) => String(p).localeCompare(String(q))),
      [
        ['read', 'EXPIRED', 1],
        ['write', 'RELEASED', 1],
        ['write', 'RELEASED', 2],
      ], // the reader's row is written after its rollback, off the caller's path: in any order
    );
    assert.ok(rel === null || (rel as Error).name === 'LockLostError', String(rel));
  });

  it('killed reader connection: writer gets in; reader rows', async () => {
    const a = await start({});
    const b = await start({});
    const key = 'kill-r';
    await (await b.locks.acquire(key)).release();
    let lost: unknown;
    const reader = a.locks
      .runLocked(
        key,
        async () => {
          const [row] = (await a.locks.manager.query(sessionIdSql(db))) as { id: number }[];
          await killSession(db, row!.id);
          await eventually(() => a.locks.currentLock!.signal.aborted, 3_000, 'signal');
          try {
            await a.locks.manager.query('SELECT 1');
          } catch (e) {
            lost = e;
          }
        },
        { mode: 'read' },
      )
      .then(
        () => null,
        (e: unknown) => e,
      );
    const outcome = await reader;
    const w = await b.locks.acquire(key, { timeoutMs: 2_000 });
    await w.release();
    await eventually(async () => (await db.logRows(key)).length >= 3, 3_000, 'rows');
    const rows = await db.logRows(key);
    assert.ok(outcome instanceof Error && outcome.name === 'LockLostError', `outcome ${String(outcome)}; inner ${String(lost)}`);
    assert.deepEqual(
      rows.map((x) => [x.mode, x.status, Number(x.fencing_token)]).sort((p, q) => String(p).localeCompare(String(q))),
      [
        ['read', 'EXPIRED', 1],
        ['write', 'RELEASED', 1],
        ['write', 'RELEASED', 2],
      ], // the reader's row is written after its rollback, off the caller's path: in any order
    );
  });
});
