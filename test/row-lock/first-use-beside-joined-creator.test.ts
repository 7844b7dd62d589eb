import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';
import { createLockApp } from '../support/lock-app.js';
import { runSql } from '../support/portable-sql.js';
import { describeError, outcome, timedOutcome } from '../support/settled.js';
import { TestDatabase } from '../support/test-database.js';

const MARGIN_MS = 500;
const HOLD_MS = 1_500;

/**
 * A key's first use inside a joined transaction: its row is created apart and committed, and the
 * hold keeps it locked. Another process's first use of the same key must see it as a busy key (a
 * single try answers at once, a budget waits for the hold to end), not as a connection error. (On
 * PostgreSQL the row was once created inside the joined transaction, uncommitted for the whole
 * hold: the other caller's creation statement then waited for it.)
 */
contractSuite('bounded-wait', 'row-lock first use beside a joined creator of the same key', { postgres: true }, (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  const apps: { app: INestApplicationContext; locks: LockService }[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE work (id ${db.sql.autoId}, note VARCHAR(32))${db.sql.tableOptions}`);
    for (let i = 0; i < 2; i++) apps.push(await createLockApp(db.settings, target.options({ janitor: false, escapedWrites: 'ignore' })));
  });
  after(async () => {
    for (const a of apps) await a.app.close();
    await db?.drop();
  });

  /** `a` holds `key` in `mode` (its row created by this very hold) inside an outer hold, for HOLD_MS; `during` runs meanwhile. */
  async function whileCreatorHolds<T>(key: string, during: () => Promise<T>, mode: 'read' | 'write' = 'write'): Promise<T> {
    const [a] = apps as [(typeof apps)[0]];
    let held!: () => void;
    const holding = new Promise<void>((resolve) => (held = resolve));
    const creator = a.locks.runLocked(`outer:${key}`, () =>
      a.locks.runLocked(
        key,
        async () => {
          held();
          await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
        },
        { mode },
      ),
    );
    await holding;
    try {
      // Not blind: the key's row was created first, committed, and the creator holds it.
      const rows = await db.query<{ n: number | string }[]>('SELECT count(*) AS n FROM db_lock WHERE lock_key = ?', [Buffer.from(key)]);
      assert.equal(Number(rows[0]!.n), 1, 'the key row as the creator left it during its hold');
      return await during();
    } finally {
      await creator;
    }
  }

  it('a single try answers busy at once', async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const tried = await whileCreatorHolds('fresh:once', () => timedOutcome(() => b.locks.runLocked('fresh:once', () => 'ran', { timeoutMs: 0 })));
    assert.ok(tried.error instanceof LockTimeoutError, `expected LockTimeoutError, got ${describeError(tried.error)}`);
    assert.ok(tried.ms < MARGIN_MS, `answered after ${Math.round(tried.ms)} ms`);
  });

  it("onLocked 'skip' skips at once", async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const skipped = await whileCreatorHolds('fresh:skip', () =>
      outcome(b.locks.runLocked('fresh:skip', () => 'ran', { timeoutMs: 0, onLocked: 'skip' })),
    );
    assert.equal(skipped.error, undefined, describeError(skipped.error));
    assert.equal(skipped.value, undefined, 'the work did not run');
  });

  it('a budget longer than the hold gets the key once the creator commits', async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const waited = await whileCreatorHolds('fresh:wait', () =>
      timedOutcome(() => b.locks.runLocked('fresh:wait', () => 'ran', { timeoutMs: HOLD_MS + 3_000 })),
    );
    assert.equal(waited.error, undefined, describeError(waited.error));
    assert.equal(waited.value, 'ran');
    assert.ok(waited.ms < HOLD_MS + 3_000 + MARGIN_MS, `granted after ${Math.round(waited.ms)} ms`);
  });

  it('a budget shorter than the hold times out, typed, within it', async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const BUDGET = 400;
    const timed = await whileCreatorHolds('fresh:short', () =>
      timedOutcome(() => b.locks.runLocked('fresh:short', () => 'ran', { timeoutMs: BUDGET })),
    );
    assert.ok(timed.error instanceof LockTimeoutError, `expected LockTimeoutError, got ${describeError(timed.error)}`);
    assert.ok(timed.ms < BUDGET + MARGIN_MS, `answered after ${Math.round(timed.ms)} ms`);
  });

  it('a reader beside a reader that created the key: granted, or busy at once, typed', async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const tried = await whileCreatorHolds(
      'fresh:readers',
      () => timedOutcome(() => b.locks.runLocked('fresh:readers', () => 'ran', { mode: 'read', timeoutMs: 0 })),
      'read',
    );
    assert.ok(tried.error === undefined || tried.error instanceof LockTimeoutError, `untyped: ${describeError(tried.error)}`);
    assert.ok(tried.ms < MARGIN_MS, `answered after ${Math.round(tried.ms)} ms`);
  });

  it('a reader with a budget beside a reader that created the key: granted within it', async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const waited = await whileCreatorHolds(
      'fresh:readers-wait',
      () => timedOutcome(() => b.locks.runLocked('fresh:readers-wait', () => 'ran', { mode: 'read', timeoutMs: HOLD_MS + 3_000 })),
      'read',
    );
    assert.equal(waited.error, undefined, describeError(waited.error));
    assert.equal(waited.value, 'ran');
  });

  /**
   * `b`'s nested take of `key` (its first use, inside b's own outer hold) while the creator holds
   * it, with `budget`; then b's outer call writes a row. Answers the nested outcome and whether
   * b's write committed.
   */
  async function joinedBeside(key: string, budget: number): Promise<{ nested: Awaited<ReturnType<typeof timedOutcome>>; committed: boolean }> {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const nested = await whileCreatorHolds(key, () =>
      b.locks.runLocked(`outer-b:${key}`, async () => {
        const inner = await timedOutcome(() => b.locks.runLocked(key, () => 'ran', { timeoutMs: budget }));
        await runSql(b.locks.manager, 'INSERT INTO work (note) VALUES (?)', [key]);
        return inner;
      }),
    );
    const rows = await db.query<{ n: number | string }[]>('SELECT count(*) AS n FROM work WHERE note = ?', [key]);
    return { nested, committed: Number(rows[0]!.n) === 1 };
  }

  it('a joined first use with a budget shorter than the hold times out, typed, and its enclosing transaction goes on and commits', async () => {
    const BUDGET = 400;
    const { nested, committed } = await joinedBeside('fresh:joined-short', BUDGET);
    assert.ok(nested.error instanceof LockTimeoutError, `expected LockTimeoutError, got ${describeError(nested.error)}`);
    assert.ok(nested.ms < BUDGET + MARGIN_MS, `answered after ${Math.round(nested.ms)} ms`);
    assert.ok(committed, 'the enclosing call wrote after the timeout and committed');
  });

  it('a joined first use with a budget longer than the hold gets the key once the creator commits', async () => {
    const { nested, committed } = await joinedBeside('fresh:joined-wait', HOLD_MS + 3_000);
    assert.equal(nested.error, undefined, describeError(nested.error));
    assert.equal(nested.value, 'ran');
    assert.ok(committed, 'the enclosing call committed');
  });

  it('a lease single try and a lease budget beside that creator: busy at once, then granted once it commits', async () => {
    const [, b] = apps as [unknown, (typeof apps)[0]];
    const [once, waited] = await whileCreatorHolds('fresh:lease', async () => {
      const t0 = performance.now();
      const first = await outcome(b.locks.runLocked('fresh:lease', () => 'ran', { strategy: 'lease', timeoutMs: 0 }));
      const onceMs = performance.now() - t0;
      const second = await outcome(b.locks.runLocked('fresh:lease', () => 'ran', { strategy: 'lease', timeoutMs: HOLD_MS + 3_000 }));
      return [{ ...first, ms: onceMs }, second];
    });
    assert.ok(once.error instanceof LockTimeoutError, `expected LockTimeoutError, got ${describeError(once.error)}`);
    assert.ok(once.ms < MARGIN_MS, `answered after ${Math.round(once.ms)} ms`);
    assert.equal(waited.error, undefined, describeError(waited.error));
    assert.equal(waited.value, 'ran');
  });
});
