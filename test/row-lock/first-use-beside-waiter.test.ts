import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DbLockError, LockTimeoutError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { timedOutcome } from '../support/settled.js';
import { TestDatabase } from '../support/test-database.js';

const MARGIN_MS = 500;

/**
 * timeoutMs bounds every row-lock caller, a key's first use included ("sub-second budgets hold").
 * A multi-key row-lock caller waiting in the server for a held key, with a never-seen key in the
 * same request, must not make another process's first use of an unrelated new key overrun its budget.
 */
contractSuite('bounded-wait', 'row-lock first use beside a multi-key waiter', { postgres: true }, (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  const apps: { app: INestApplicationContext; locks: LockService }[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    for (let i = 0; i < 3; i++) apps.push(await createLockApp(db.settings, target.options({ janitor: false })));
  });
  after(async () => {
    for (const a of apps) await a.app.close();
    await db?.drop();
  });

  it('control: the same multi-key waiter with both key rows present: the first use of a new key is granted at once', async () => {
    const [a, b, c] = apps as [(typeof apps)[0], (typeof apps)[0], (typeof apps)[0]];
    await (await b.locks.acquire('c:present')).release();
    const held = await a.locks.acquire('z:held2');
    const multi = timedOutcome(() => b.locks.acquire(['c:present', 'z:held2'], { timeoutMs: 5_000 }));
    await sleep(300);
    const fresh = await timedOutcome(() => c.locks.acquire('d:fresh', { timeoutMs: 300 }));
    if (fresh.value) await fresh.value.release();
    await held.release();
    const m = await multi;
    if (m.value) await m.value.release();
    assert.equal(fresh.error, undefined, String(fresh.error));
    assert.ok(fresh.ms <= 300 + MARGIN_MS, `${Math.round(fresh.ms)} ms`);
  });

  it('a first use of a new key with timeoutMs 300 answers within 300 ms + margin while a multi-key caller waits in the server', async (t) => {
    const [a, b, c] = apps as [(typeof apps)[0], (typeof apps)[0], (typeof apps)[0]];
    const held = await a.locks.acquire('z:held');
    // Multi-key: 'm:new' is never seen (its row missing), 'z:held' is held by a: this caller waits in the server.
    const multi = timedOutcome(() => b.locks.acquire(['m:new', 'z:held'], { timeoutMs: 5_000 }));
    await sleep(300);
    const TIMEOUT = 300;
    const freshP = timedOutcome(() => c.locks.acquire('n:fresh', { timeoutMs: TIMEOUT }));
    await sleep(800);
    if (target.database !== 'postgres') {
      const waits = await db.query<{ info: string; state: string }[]>(
        'SELECT LEFT(info, 60) AS info, state FROM information_schema.PROCESSLIST WHERE db = ? AND info IS NOT NULL AND id <> CONNECTION_ID()',
        [db.name],
      );
      t.diagnostic(JSON.stringify(waits));
    }
    const fresh = await freshP;
    if (fresh.value) await fresh.value.release();
    await held.release();
    const m = await multi;
    if (m.value) await m.value.release();
    assert.ok(fresh.error === undefined || fresh.error instanceof LockTimeoutError, `untyped: ${String(fresh.error)}`);
    assert.ok(
      fresh.ms <= TIMEOUT + MARGIN_MS,
      `first use of n:fresh answered after ${Math.round(fresh.ms)} ms (timeoutMs ${TIMEOUT}), ${fresh.error ? String(fresh.error) : 'granted'}`,
    );
  });

  it('a nested first use of a new key (inside an open row-lock transaction) with timeoutMs 300 answers within 300 ms + margin beside that waiter', async () => {
    const [a, b, c] = apps as [(typeof apps)[0], (typeof apps)[0], (typeof apps)[0]];
    await (await c.locks.acquire('a:outer')).release();
    const held = await a.locks.acquire('z:held3');
    const multi = timedOutcome(() => b.locks.acquire(['p:new3', 'z:held3'], { timeoutMs: 5_000 }));
    await sleep(300);
    const TIMEOUT = 300;
    let nested: { value?: unknown; error?: unknown; ms: number } | undefined;
    await c.locks
      .runLocked('a:outer', async () => {
        nested = await timedOutcome(() => c.locks.runLocked('q:fresh3', async () => 'ran', { timeoutMs: TIMEOUT }));
      })
      .catch(() => undefined);
    await held.release();
    const m = await multi;
    if (m.value) await m.value.release();
    assert.ok(
      nested!.ms <= TIMEOUT + MARGIN_MS,
      `nested first use answered after ${Math.round(nested!.ms)} ms (timeoutMs ${TIMEOUT}): ${nested!.error ? String(nested!.error) : 'granted'}`,
    );
  });

  it('a nested first use beside that waiter, with the session innodb_lock_wait_timeout (1 s) below its timeoutMs: a typed answer', async (t) => {
    if (target.database === 'postgres') return t.skip('MySQL session setting');
    const [a, b] = apps as [(typeof apps)[0], (typeof apps)[0]];
    const d = await createLockApp(db.settings, target.options({ janitor: false }));
    try {
      const pool = (
        d.app.get(DataSource).driver as unknown as {
          pool: { on: (e: string, f: (c: unknown) => void) => void; _allConnections: { toArray(): unknown[] } };
        }
      ).pool;
      const setup = (c: unknown) =>
        (c as { query: (s: string, cb: () => void) => void }).query('SET SESSION innodb_lock_wait_timeout = 1', () => undefined);
      pool.on('connection', setup);
      for (const c of pool._allConnections.toArray()) setup(c);
      await (await d.locks.acquire('b:outer4')).release();
      const held = await a.locks.acquire('z:held4');
      const multi = timedOutcome(() => b.locks.acquire(['r:new4', 'z:held4'], { timeoutMs: 5_000 }));
      await sleep(300);
      let nested: { value?: unknown; error?: unknown; ms: number } | undefined;
      await d.locks
        .runLocked('b:outer4', async () => {
          nested = await timedOutcome(() => d.locks.runLocked('s:fresh4', async () => 'ran', { timeoutMs: 3_000 }));
        })
        .catch(() => undefined);
      await held.release();
      const m = await multi;
      if (m.value) await m.value.release();
      assert.ok(
        nested!.error === undefined || nested!.error instanceof DbLockError,
        `nested first use after ${Math.round(nested!.ms)} ms: untyped ${String(nested!.error)}`,
      );
    } finally {
      await d.app.close();
    }
  });
});
