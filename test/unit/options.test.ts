import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DB_LOCK_DEFAULTS, DbLockOptionsError, resolveOptions } from '../../lib/index.js';
import { MAX_TIMER_MS, MIN_LEASE_MS } from '../../lib/db-lock.options.js';
import { checkLease, resolveLockOptions } from '../../lib/core/lock-request.js';

function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof DbLockOptionsError, `expected DbLockOptionsError, got ${String(error)}`);
    assert.equal(error.name, 'DbLockOptionsError');
    for (const problem of error.problems) assert.ok(error.message.includes(problem), 'every problem is in the message');
    return error.problems;
  }
  assert.fail('no DbLockOptionsError was thrown');
}

describe('resolveOptions', () => {
  it('gives the documented defaults, frozen', () => {
    const resolved = resolveOptions(undefined);
    assert.deepEqual(resolved, { ...DB_LOCK_DEFAULTS });
    assert.equal(resolved.leaseMs, 30_000);
    assert.equal(resolved.timeoutMs, 10_000);
    assert.equal(resolved.slowThresholdMs, 3_000);
    assert.equal(resolved.poolSize, 8);
    assert.ok(Object.isFrozen(resolved));
    assert.ok(Object.isFrozen(DB_LOCK_DEFAULTS));
    assert.ok(Object.isFrozen(DB_LOCK_DEFAULTS.janitor));
    assert.throws(() => {
      (DB_LOCK_DEFAULTS as { leaseMs: number }).leaseMs = 1;
    }, TypeError);
    assert.throws(() => {
      (resolved as { leaseMs: number }).leaseMs = 1;
    }, TypeError);
    assert.deepEqual(resolveOptions(null), resolved);
    assert.deepEqual(resolveOptions({}), resolved);
  });

  it('merges given values over the defaults without touching the defaults', () => {
    const resolved = resolveOptions({ leaseMs: 5_000, namespace: 'app', timeoutMs: Infinity, janitor: false, writerPreference: false });
    assert.equal(resolved.leaseMs, 5_000);
    assert.equal(resolved.namespace, 'app');
    assert.equal(resolved.timeoutMs, Infinity);
    assert.equal(resolved.janitor, false);
    assert.equal(resolved.writerPreference, false);
    assert.equal(resolved.retryMaxDelayMs, DB_LOCK_DEFAULTS.retryMaxDelayMs);
    assert.equal(DB_LOCK_DEFAULTS.leaseMs, 30_000);
    const janitor = resolveOptions({ janitor: { intervalMs: 1_000 } }).janitor;
    assert.ok(janitor && Object.isFrozen(janitor));
    assert.deepEqual(janitor, { ...DB_LOCK_DEFAULTS.janitor, intervalMs: 1_000 });
  });

  it('lists every problem at once', () => {
    const problems = problemsOf(() =>
      resolveOptions({
        namespace: 'x'.repeat(65),
        leaseMs: NaN,
        timeoutMs: -1,
        retryMinDelayMs: 0,
        retryMaxDelayMs: 1.5,
        slowThresholdMs: '3s',
        maxHoldMs: -Infinity,
        poolSize: 101,
        writerPreference: 1,
        janitor: { batchSize: 0, extra: 1 },
        onEvent: {},
        typo: true,
        leaseMS: 1,
      }),
    );
    const expected = [
      /namespace/,
      /leaseMs .*NaN/,
      /timeoutMs .*-1/,
      /retryMinDelayMs .*0/,
      /retryMaxDelayMs .*1\.5/,
      /slowThresholdMs .*'3s'/,
      /maxHoldMs .*-Infinity/,
      /poolSize .*101/,
      /writerPreference .*1/,
      /janitor\.batchSize .*0/,
      /unknown option 'janitor\.extra'/,
      /onEvent/,
      /unknown option 'typo'/,
      /unknown option 'leaseMS'/,
    ];
    assert.equal(problems.length, expected.length, problems.join('\n'));
    for (const pattern of expected)
      assert.ok(
        problems.some((p) => pattern.test(p)),
        `nothing matches ${pattern}`,
      );
  });

  it('checks durations: integers within the timer range, Infinity only where it means "never"', () => {
    for (const bad of [NaN, -1, 1.5, MAX_TIMER_MS + 1, Infinity, 'abc', '1.5', null, true]) {
      assert.equal(problemsOf(() => resolveOptions({ leaseMs: bad })).length, 1, `leaseMs ${String(bad)}`);
    }
    assert.equal(problemsOf(() => resolveOptions({ leaseMs: MIN_LEASE_MS - 1 })).length, 1);
    assert.equal(resolveOptions({ leaseMs: MIN_LEASE_MS }).leaseMs, MIN_LEASE_MS);
    assert.equal(resolveOptions({ leaseMs: MAX_TIMER_MS }).leaseMs, MAX_TIMER_MS);
    for (const name of ['timeoutMs', 'slowThresholdMs', 'maxHoldMs'] as const) {
      assert.equal(resolveOptions({ [name]: Infinity })[name], Infinity);
      assert.equal(problemsOf(() => resolveOptions({ [name]: MAX_TIMER_MS + 1 })).length, 1, name);
    }
    assert.equal(resolveOptions({ timeoutMs: 0 }).timeoutMs, 0);
    // Module options often come from environment variables through ConfigService: decimal strings count.
    assert.equal(resolveOptions({ leaseMs: '5000' }).leaseMs, 5000);
    assert.equal(resolveOptions({ timeoutMs: 'Infinity', writerPreference: 'false' }).timeoutMs, Infinity);
    assert.equal(resolveOptions({ writerPreference: 'false' }).writerPreference, false);
    assert.equal(resolveOptions({ janitor: { logRetentionMs: MAX_TIMER_MS * 10 } }).janitor && true, true, 'retention is no timer');
  });

  it('checks relations between options', () => {
    assert.match(problemsOf(() => resolveOptions({ retryMinDelayMs: 300, retryMaxDelayMs: 200 }))[0]!, /must not exceed/);
    assert.match(problemsOf(() => resolveOptions({ leaseMs: 1_000, renewIntervalMs: 1_000 }))[0]!, /shorter than leaseMs/);
    assert.equal(resolveOptions({ leaseMs: 1_000, renewIntervalMs: 999 }).renewIntervalMs, 999);
  });

  it("escapedWrites: 'warn' by default, 'error' or 'ignore'; transactionHost: 'auto' by default, false or a TransactionHost", () => {
    assert.equal(resolveOptions({}).escapedWrites, 'warn');
    assert.equal(resolveOptions({ escapedWrites: 'error' }).escapedWrites, 'error');
    assert.equal(resolveOptions({ escapedWrites: 'ignore' }).escapedWrites, 'ignore');
    assert.equal(resolveOptions({}).transactionHost, 'auto');
    assert.equal(resolveOptions({ transactionHost: false }).transactionHost, false);
    assert.equal(resolveOptions({ transactionHost: 'false' }).transactionHost, false, 'from configuration');
    const host = {
      tx: undefined,
      isTransactionActive: () => false,
      withoutTransaction: async () => undefined,
      withTransaction: async () => undefined,
    };
    assert.equal(resolveOptions({ transactionHost: host }).transactionHost, host);
    const problems = problemsOf(() => resolveOptions({ escapedWrites: 'log', transactionHost: {} }));
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.match(problems[0]!, /escapedWrites must be 'warn', 'error' or 'ignore', got 'log'/);
    assert.match(problems[1]!, /transactionHost must be 'auto', false or a @nestjs-cls\/transactional TransactionHost/);
    assert.match(problemsOf(() => resolveOptions({ escapedWrites: 'false' }))[0]!, /got 'false'/, 'text options are never read as booleans');
  });

  it('refuses options that are not an object', () => {
    for (const bad of ['fast', 5, [], true]) assert.equal(problemsOf(() => resolveOptions(bad)).length, 1, String(bad));
  });
});

describe('resolveOptions with a typed config object', () => {
  it('reads options a class exposes through getters, at the top level and in janitor, and still refuses unknown ones', () => {
    class JanitorConfig {
      get intervalMs(): string {
        return '2500';
      }
    }
    class LockConfig {
      readonly namespace = 'billing';
      get leaseMs(): string {
        return '5000';
      }
      get writerPreference(): boolean {
        return false;
      }
      get janitor(): JanitorConfig {
        return new JanitorConfig();
      }
      describe(): string {
        return 'a method no option is named after';
      }
    }
    const resolved = resolveOptions(new LockConfig());
    assert.equal(resolved.namespace, 'billing');
    assert.equal(resolved.leaseMs, 5000);
    assert.equal(resolved.writerPreference, false);
    assert.ok(resolved.janitor);
    assert.equal(resolved.janitor.intervalMs, 2500);
    assert.equal(resolved.janitor.batchSize, DB_LOCK_DEFAULTS.janitor && DB_LOCK_DEFAULTS.janitor.batchSize);
    class Misspelt extends LockConfig {
      readonly leasMs = 1000;
    }
    assert.deepEqual(
      problemsOf(() => resolveOptions(new Misspelt())),
      ["unknown option 'leasMs'"],
    );
  });
});

describe('resolveLockOptions (one call)', () => {
  const defaults = resolveOptions({ leaseMs: 2_000, timeoutMs: 500 });

  it('takes the module defaults', () => {
    const rest = { leaseMs: 2_000, strategy: 'lease', maxAttempts: Infinity, name: 'unnamed' };
    assert.deepEqual(resolveLockOptions(undefined, defaults), { mode: 'write', timeoutMs: 500, ...rest });
    assert.deepEqual(resolveLockOptions({ mode: 'read', timeoutMs: 0 }, defaults), { mode: 'read', timeoutMs: 0, ...rest });
    assert.equal(resolveLockOptions({ name: 'loan:{id}' }, defaults).name, 'loan:{id}');
    assert.equal(resolveLockOptions({ timeoutMs: Infinity }, defaults).timeoutMs, Infinity);
  });

  it('lists every problem of one call', () => {
    assert.equal(problemsOf(() => resolveLockOptions({ mode: 'x', timeoutMs: NaN, leaseMs: 99, foo: 1 }, defaults)).length, 4);
    for (const name of ['', 'x'.repeat(256), 7, null])
      assert.match(problemsOf(() => resolveLockOptions({ name }, defaults)).join(), /name must be a non-empty string of at most 255 characters/);
    assert.equal(problemsOf(() => resolveLockOptions({ leaseMs: Infinity }, defaults)).length, 1);
    assert.equal(problemsOf(() => resolveLockOptions('x', defaults)).length, 1);
  });

  it('one-try mode (tryAcquire) refuses timeoutMs and always gives 0', () => {
    assert.equal(resolveLockOptions({ mode: 'read' }, defaults, true).timeoutMs, 0);
    assert.match(problemsOf(() => resolveLockOptions({ timeoutMs: 100 }, defaults, true))[0]!, /unknown option 'timeoutMs'/);
  });

  it('checkLease accepts undefined and valid leases only', () => {
    assert.equal(checkLease(undefined), undefined);
    assert.equal(checkLease(MIN_LEASE_MS), MIN_LEASE_MS);
    for (const bad of [NaN, 0, -5, 99, 1.5, Infinity, MAX_TIMER_MS + 1, '1000']) assert.equal(problemsOf(() => checkLease(bad)).length, 1);
  });
});
