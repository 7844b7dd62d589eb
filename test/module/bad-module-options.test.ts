import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import { DbLockModule, DbLockOptionsError } from '../../lib/index.js';
import { contractTargets } from '../support/contract-targets.js';

/**
 * Bad module options: the module refuses to start, lists every problem in one typed error, and
 * writes nothing. Bad call input: bad-input.test.ts.
 */
/** One target per server: module options are checked before the strategy matters. */
const oneTargetPerServer = [...new Map(contractTargets().map((target) => [target.server, target])).values()];

for (const target of oneTargetPerServer)
  describe(`bad module options fail at bootstrap with every problem listed [${target.server}]`, () => {
    let db: TestDatabase;
    before(async () => {
      db = await TestDatabase.forTarget(target);
    });
    after(async () => {
      await db?.drop();
    });

    it('DbLockModule.forRoot with many bad options', async () => {
      const bad = {
        namespace: 42,
        leaseMs: -5,
        timeoutMs: NaN,
        retryMinDelayMs: 500,
        retryMaxDelayMs: 100,
        slowThresholdMs: 0,
        renewIntervalMs: 60_000,
        maxHoldMs: 1.5,
        poolSize: 1,
        writerPreference: 'yes',
        janitor: { intervalMs: 5, sweep: true },
        onEvent: 'log',
        lease: 1000,
      };
      await assert.rejects(bootLockApp(db.settings, DbLockModule.forRoot(bad as never), { logger: false }), (error: unknown) => {
        assert.ok(error instanceof DbLockOptionsError, `expected DbLockOptionsError, got ${String(error)}`);
        const expected = [
          /namespace must be a string, got 42/,
          /leaseMs must be .*got -5/,
          /timeoutMs must be .*got NaN/,
          /retryMinDelayMs \(500\) must not exceed retryMaxDelayMs \(100\)/,
          /slowThresholdMs must be .*got 0/,
          /maxHoldMs must be .*got 1\.5/,
          /poolSize must be .*got 1/,
          /writerPreference must be a boolean, got 'yes'/,
          /janitor\.intervalMs must be .*got 5/,
          /unknown option 'janitor\.sweep'/,
          /onEvent must be a function, got 'log'/,
          /unknown option 'lease'/,
        ];
        for (const pattern of expected)
          assert.ok(
            error.problems.some((p) => pattern.test(p)),
            `no problem matches ${pattern}:\n${error.message}`,
          );
        assert.equal(error.problems.length, expected.length, error.message);
        return true;
      });
      const [a] = await db.query<{ n: number }[]>('SELECT (SELECT COUNT(*) FROM db_lock) + (SELECT COUNT(*) FROM db_lock_log) AS n');
      assert.equal(Number(a!.n), 0);
    });

    it('registration fields are checked when the module is built', () => {
      assert.throws(
        () => DbLockModule.forRoot({ dataSourceName: '', isGlobal: 'yes' as never }),
        (error: unknown) => {
          assert.ok(error instanceof DbLockOptionsError);
          assert.equal(error.problems.length, 2, error.message);
          return true;
        },
      );
      assert.throws(() => DbLockModule.forRootAsync({} as never), DbLockOptionsError);
    });
  });
