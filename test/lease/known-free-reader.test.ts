import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';

const SCENARIOS = new URL('../contract/scenarios/read-write.js', import.meta.url).href;

/**
 * Writer preference against the one-INSERT grant of a key this process knows free: a process that
 * held a key for writing and released it must not slip a reader in by that INSERT while a writer of
 * another process waits on the key (its "writer waiting" mark unexpired). A process that never held
 * the key is refused then (the control); the one that released it must be refused the same. (The
 * PostgreSQL store grants a known-free key in one statement to single-key writers only: its readers
 * take the full grant, which must refuse them the same.)
 */
contractSuite('lease-writer-preference', 'writer preference against the one-INSERT grant of a known-free key', { postgres: true }, (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  let mine: LockService;
  let other: LockService;
  let writer: LockWorker;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    const a = await createLockApp(db.settings, { ...target.options(), janitor: false });
    const c = await createLockApp(db.settings, { ...target.options(), janitor: false });
    apps.push(a.app, c.app);
    mine = a.locks;
    other = c.locks;
    writer = await LockWorker.start({ settings: db.settings, options: target.options() });
  });
  after(async () => {
    await writer?.close();
    for (const app of apps) await app.close();
    await db?.drop();
  });

  /** How long the key's "writer waiting" mark still holds new readers back, in ms (server clock; <= 0: none). */
  const markLeftMs = async (key: string): Promise<number> => {
    const rows = await db.query<{ left_us: number | null }[]>(
      `SELECT ${db.sql.micros('writer_waiting_until')} - ${db.sql.micros(db.sql.utcNow)} AS left_us FROM db_lock WHERE lock_key = ?`,
      [Buffer.from(key)],
    );
    return rows[0]?.left_us == null ? 0 : Number(rows[0].left_us) / 1000;
  };

  /** Our write hold, a writer of another process waiting on it (marked), our release; then `reader` tries to read. */
  const readerAfterRelease = async (key: string, reader: LockService) => {
    const held = await mine.acquire(key);
    const waiting = writer.run<{ waitedMs: number; fencingToken: number }>(SCENARIOS, 'writeOnce', { key, timeoutMs: 15_000 });
    await waitFor(async () => (await markLeftMs(key)) > 0);
    // The writer stays waiting but frozen between two tries, so it cannot win the race below by timing:
    // its mark (renewed by each refused try) holds new readers back until it runs out.
    writer.signal('SIGSTOP');
    let read: Awaited<ReturnType<LockService['tryAcquire']>>;
    let markLeft: number;
    let writerRows: { n: number }[];
    try {
      await held.release();
      read = await reader.tryAcquire(key, { mode: 'read' });
      markLeft = await markLeftMs(key);
      writerRows = await db.query<{ n: number }[]>(
        "SELECT COUNT(*) AS n FROM db_lock_log WHERE lock_key = ? AND mode = 'write' AND status <> 'CLAIMED' AND holder LIKE ?",
        [Buffer.from(key), `%:${writer.pid}`],
      );
    } finally {
      writer.signal('SIGCONT');
    }
    const keyRow = await db.query<{ t: number }[]>('SELECT fencing_token AS t FROM db_lock WHERE lock_key = ?', [Buffer.from(key)]);
    const readToken = read?.fencingToken;
    if (read) await new Promise((r) => setTimeout(r, 1500));
    await read?.release();
    const { waitedMs } = await waiting;
    return {
      granted: read !== null,
      writerGrantedBefore: Number(writerRows[0]!.n) > 0,
      markLeft,
      waitedMs,
      heldToken: held.fencingToken,
      readToken,
      keyRowToken: keyRow[0]?.t,
    };
  };

  it('control: a process that never held the key is refused a read while the writer waits', async (t) => {
    const r = await readerAfterRelease('kf:control', other);
    t.diagnostic(JSON.stringify(r));
    assert.ok(!r.granted || r.writerGrantedBefore, 'no reader admitted while a writer waits');
  });

  it('the process that just released the key is refused a read while the writer waits, as anyone else', async (t) => {
    const r = await readerAfterRelease('kf:reader', mine);
    t.diagnostic(JSON.stringify(r));
    assert.ok(
      !r.granted || r.writerGrantedBefore,
      `a reader was admitted by the one-INSERT grant while a writer of another process waited (mark ${Math.round(r.markLeft)} ms left); ` +
        `the writer waited ${Math.round(r.waitedMs)} ms`,
    );
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
