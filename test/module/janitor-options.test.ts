/**
 * The janitor's options: README options table (`janitor.intervalMs` ms ≥ 100, `janitor.logRetentionMs`
 * ms 0 and up or Infinity, `janitor.batchSize` rows 1–100000, `janitor.idleKeyMs` ms 0 and up or
 * Infinity); bad values are a DbLockOptionsError listing the problem, before anything is written.
 * The top-level options reject `null` (e.g. `leaseMs: null`); the janitor's must too, rather than
 * silently run with the default (a `logRetentionMs: null` meant as "keep" would delete the log
 * after 7 days).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import { DbLockModule, DbLockOptionsError, resolveOptions } from '../../lib/index.js';

describe('janitor options', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('bad janitor values (out of range, fractions, NaN, wrong types, unknown keys) are refused with DbLockOptionsError naming them', () => {
    const bad: [unknown, RegExp][] = [
      [{ intervalMs: 99 }, /janitor\.intervalMs/],
      [{ intervalMs: Infinity }, /janitor\.intervalMs/],
      [{ intervalMs: 2 ** 31 }, /janitor\.intervalMs/],
      [{ logRetentionMs: -1 }, /janitor\.logRetentionMs/],
      [{ logRetentionMs: 1.5 }, /janitor\.logRetentionMs/],
      [{ logRetentionMs: NaN }, /janitor\.logRetentionMs/],
      [{ batchSize: 0 }, /janitor\.batchSize/],
      [{ batchSize: 100_001 }, /janitor\.batchSize/],
      [{ batchSize: '10 rows' }, /janitor\.batchSize/],
      [{ idleKeyMs: -5 }, /janitor\.idleKeyMs/],
      [{ idleKeyMs: 2 ** 53 }, /janitor\.idleKeyMs/],
      [{ retention: 5 }, /unknown option 'janitor\.retention'/],
      [null, /janitor must be an object or false/],
      [true, /janitor must be an object or false/],
      [[], /janitor must be an object or false/],
    ];
    for (const [janitor, message] of bad) {
      assert.throws(
        () => resolveOptions({ janitor }),
        (e: unknown) => e instanceof DbLockOptionsError && message.test((e as Error).message),
        `janitor: ${String(JSON.stringify(janitor))}`,
      );
    }
  });

  it('null janitor values are refused as null top-level options are, not silently replaced by the defaults', () => {
    assert.throws(() => resolveOptions({ leaseMs: null }), DbLockOptionsError, 'top level: leaseMs null is refused');
    const accepted: string[] = [];
    for (const key of ['intervalMs', 'logRetentionMs', 'batchSize', 'idleKeyMs']) {
      try {
        const resolved = resolveOptions({ janitor: { [key]: null } });
        accepted.push(`janitor.${key}: null accepted as ${(resolved.janitor as Record<string, number>)[key]}`);
      } catch (error) {
        assert.ok(error instanceof DbLockOptionsError, `janitor.${key}: null: ${String(error)}`);
      }
    }
    assert.deepEqual(accepted, [], `null janitor options silently became the defaults: ${accepted.join('; ')}`);
  });

  it('a module with a bad janitor option fails to boot typed and writes nothing (no process row)', async () => {
    await assert.rejects(bootLockApp(db.settings, DbLockModule.forRoot({ janitor: { batchSize: 0 } })), DbLockOptionsError);
    await assert.rejects(
      bootLockApp(db.settings, DbLockModule.forRootAsync({ useFactory: () => ({ janitor: { logRetentionMs: -1 } }) })),
      DbLockOptionsError,
    );
    const [row] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM db_lock_process');
    assert.equal(Number(row!.n), 0, 'no process row registered');
  });

  it('the largest finite durations run a janitor pass without SQL errors (keep everything young enough)', async () => {
    const { app, locks } = await bootLockApp(
      db.settings,
      DbLockModule.forRoot({
        janitor: { intervalMs: 2 ** 31 - 1, logRetentionMs: 9_999_999_999_999, idleKeyMs: 9_999_999_999_999, batchSize: 100_000 },
      }),
    );
    try {
      const lock = await locks.acquire('opt:k');
      await lock.release();
      const report = await locks.runJanitor();
      assert.equal(report.ran, true);
      assert.equal(report.complete, true);
      assert.equal(report.pruned, 0);
      assert.equal(report.reapedKeys, 0);
      assert.equal((await db.logRows('opt:k')).length, 1);
    } finally {
      await app.close();
    }
  });
});
