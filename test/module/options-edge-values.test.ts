import 'reflect-metadata';
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DbLockModule, DbLockOptionsError } from '../../lib/index.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Module options that are not what the README's table allows must be refused at bootstrap with one
 * DbLockOptionsError, before any SQL ("unknown keys" included, and wrong types everywhere).
 */
describe('module options refused at bootstrap', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });
  beforeEach(async () => {
    for (const table of ['db_lock_log', 'db_lock', 'db_lock_process', 'db_lock_row_lock']) await db.query(`DELETE FROM ${table}`);
  });

  async function rowsWritten(): Promise<number> {
    const [r] = await db.query<{ n: number }[]>(
      'SELECT (SELECT COUNT(*) FROM db_lock) + (SELECT COUNT(*) FROM db_lock_log) + (SELECT COUNT(*) FROM db_lock_process) + (SELECT COUNT(*) FROM db_lock_row_lock) AS n',
    );
    return Number(r!.n);
  }

  async function bootstrapOutcome(options: unknown): Promise<{ error?: unknown; leaseMs?: number; storedLease?: number }> {
    try {
      const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot(options as never), { logger: false });
      try {
        const lock = await locks.acquire('options-proto');
        const [row] = await db.query<{ lease_ms: number }[]>('SELECT lease_ms FROM db_lock_log ORDER BY id DESC LIMIT 1');
        await lock.release();
        return { leaseMs: locks.options.leaseMs, storedLease: Number(row!.lease_ms) };
      } finally {
        await app.close();
      }
    } catch (error) {
      return { error };
    }
  }

  it('an own "__proto__" key (as JSON.parse of a config file makes it) is refused as unknown, not taken as options', async () => {
    // A configuration read from JSON: `__proto__` is an ordinary own key there, not the prototype.
    const fromJson = JSON.parse('{"namespace":"opts","__proto__":{"leaseMs":500}}') as Record<string, unknown>;
    assert.ok(Object.keys(fromJson).includes('__proto__'), 'precondition: JSON.parse made __proto__ an own key');
    const outcome = await bootstrapOutcome(fromJson);
    assert.ok(
      outcome.error instanceof DbLockOptionsError,
      `an options object with the unknown own key '__proto__' must be refused with DbLockOptionsError (unknown keys are refused), ` +
        `but bootstrap ${outcome.error ? `failed with ${String(outcome.error)}` : `succeeded and took leaseMs ${outcome.leaseMs} from inside it (grant stored lease_ms ${outcome.storedLease})`}`,
    );
    assert.match((outcome.error as DbLockOptionsError).problems.join('\n'), /unknown option '__proto__'/);
  });

  it('janitor settings given as null are refused as wrong types, as top-level options given as null are', async () => {
    // Top level: null is a wrong type (refused). The same must hold inside `janitor`.
    const top = await bootstrapOutcome({ leaseMs: null });
    assert.ok(top.error instanceof DbLockOptionsError, 'control: top-level leaseMs: null is refused');
    for (const field of ['intervalMs', 'batchSize', 'logRetentionMs', 'idleKeyMs']) {
      const outcome = await bootstrapOutcome({ janitor: { [field]: null } });
      assert.ok(
        outcome.error instanceof DbLockOptionsError,
        `janitor.${field}: null must be refused with DbLockOptionsError (a number is required; top-level null is refused), ` +
          `but bootstrap ${outcome.error ? `failed with ${String(outcome.error)}` : 'succeeded and silently used the default'}`,
      );
    }
    assert.equal(await rowsWritten(), 0, 'nothing written for refused options');
  });
  it('a namespace of at most 64 characters is accepted, counted in characters as keys are (not UTF-16 code units)', async () => {
    // README: namespace "≤ 64 characters"; keys are "1–191 characters, namespace included", counted per character (code point).
    const namespace = '\u{1F600}'.repeat(40); // 40 characters (80 UTF-16 code units, 160 bytes)
    assert.equal([...namespace].length, 40);
    let outcome: string;
    try {
      const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ namespace, janitor: false }), { logger: false });
      try {
        const lock = await locks.acquire('k');
        await lock.release();
        const rows = await db.logRows(`${namespace}:k`);
        outcome = `booted; ${rows.length} log row(s) under '<40 emoji>:k'`;
      } finally {
        await app.close();
      }
    } catch (error) {
      outcome = `refused: ${String(error)}`;
    }
    assert.match(outcome, /^booted; 1 log row/, `a 40-character namespace (≤ 64 characters) must be accepted, but it was ${outcome}`);
  });

  it('a per-call name of at most 255 characters is accepted, counted in characters (not UTF-16 code units)', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }), { logger: false });
    try {
      const name = '\u{1F512}'.repeat(200); // 200 characters, 400 UTF-16 code units
      let outcome = 'granted';
      try {
        const lock = await locks.acquire('named', { name });
        await lock.release();
      } catch (error) {
        outcome = `refused: ${String(error)}`;
      }
      assert.equal(outcome, 'granted', `a 200-character name (README: "≤ 255 characters") must be accepted, but it was ${outcome}`);
    } finally {
      await app.close();
    }
  });
});
