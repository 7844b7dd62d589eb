import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { serverUrl, TestDatabase } from '../support/test-database.js';
import { sessionsLeft } from '../support/session-count.js';
import { type Instance, startInstance, stopInstances, waitUntilReady } from '../../sample-app/demo/instances.js';
import type { LockService } from '../../lib/index.js';

/**
 * A real sample-app process (build/sample-app/main.js, as the demo starts it)
 * stopped with SIGTERM while requests are in flight: what the clients get, what is left behind.
 */
const PORT = 3190 + (process.pid % 7);

async function post(
  base: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> } | { status: 0; error: string }> {
  try {
    const r = await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  } catch (error) {
    return { status: 0, error: String(error) };
  }
}

describe('SIGTERM of a sample instance with requests in flight', () => {
  let db: TestDatabase;
  let other: { app: { close(): Promise<void> }; locks: LockService } | undefined;
  let instance: Instance | undefined;

  before(async () => {
    db = await TestDatabase.create('dblock_hdemo', { lockTables: false });
  });
  after(async () => {
    if (instance) await stopInstances([instance], 2_000);
    await other?.app.close();
    await db?.drop();
  });

  async function start(env: Record<string, string> = {}): Promise<Instance> {
    const url = serverUrl();
    url.pathname = `/${db.name}`;
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      instance = startInstance('probe', PORT, url.href);
    } finally {
      for (const k of Object.keys(env))
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
    }
    await waitUntilReady(instance);
    return instance;
  }

  it('a request waiting for a lock held elsewhere is answered 503 at SIGTERM, at once; the process ends; nothing left live', async () => {
    const inst = await start({ LOCK_TIMEOUT_MS: '15000' });
    other = await createLockApp(db.settings, { namespace: 'p2p', leaseMs: 10_000 });
    const held = await other.locks.acquire('loan:2');
    const pending = post(inst.baseUrl, '/loans/2/repay', { cents: 100 });
    // Until the repayment waits for the lock.
    const deadline = performance.now() + 10_000;
    while (performance.now() < deadline) {
      const stats = (await (await fetch(`${inst.baseUrl}/locks/stats`)).json()) as { waiting: number };
      if (stats.waiting === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const t0 = performance.now();
    inst.child.kill('SIGTERM');
    const answer = await pending;
    const answeredAfter = performance.now() - t0;
    const how = await Promise.race([inst.exited, new Promise<string>((r) => setTimeout(() => r('still running after 8 s'), 8_000))]);
    await held.release();
    assert.equal(answer.status, 503, `the waiting request: ${JSON.stringify(answer)}`);
    // Nest's shutdown hooks re-raise the signal once the app closed: 'SIGTERM' is a graceful end.
    assert.equal(how, 'SIGTERM', `process end: ${how}\n${inst.output.join('\n')}`);
    assert.ok(answeredAfter < 3_000, `answered ${Math.round(answeredAfter)} ms after SIGTERM`);
    const [{ live }] = await db.query<[{ live: number }]>(
      `SELECT COUNT(*) AS live FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED') AND holder NOT LIKE ?`,
      [`%:${process.pid}`],
    );
    assert.equal(Number(live), 0, 'the instance left no live row');
    const [{ n }] = await db.query<[{ n: number }]>('SELECT COUNT(*) AS n FROM p2p_repayment');
    assert.equal(Number(n), 0, 'nothing was repaid');
    await other.app.close();
    other = undefined;
    instance = undefined;
    // A closed socket stays listed until the server's thread reads its end: up to 3 s on a loaded host.
    assert.deepEqual(await sessionsLeft(db, 3_000), [], 'no connection of the stopped instance (or the test app) is left');
  });

  it('a repayment running (stalled on a row lock) at SIGTERM finishes and answers 201; the process then ends gracefully', async () => {
    const inst = await start();
    const blocker = await mysql.createConnection({ ...db.settings });
    let answer;
    try {
      await blocker.query('START TRANSACTION');
      await blocker.query('SELECT id FROM p2p_loan WHERE id = 1 FOR UPDATE');
      const pending = post(inst.baseUrl, '/loans/1/repay', { cents: 250 });
      await db.transactionSeen((t) => t.lockWait, 10_000);
      inst.child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 800));
      await blocker.query('ROLLBACK');
      answer = await pending;
    } finally {
      await blocker.end();
    }
    const how = await Promise.race([inst.exited, new Promise<string>((r) => setTimeout(() => r('still running after 12 s'), 12_000))]);
    assert.equal(answer.status, 201, `the running repayment: ${JSON.stringify(answer)}\n${inst.output.join('\n')}`);
    assert.equal(how, 'SIGTERM', `process end: ${how}`);
    const [{ repaid }] = await db.query<[{ repaid: string }]>('SELECT repaid_cents AS repaid FROM p2p_loan WHERE id = 1');
    assert.equal(Number(repaid), 250);
    const [{ live }] = await db.query<[{ live: number }]>(`SELECT COUNT(*) AS live FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED')`);
    assert.equal(Number(live), 0);
    instance = undefined;
    assert.deepEqual(await sessionsLeft(db, 3_000), [], 'no connection of the stopped instance is left');
  });
});
