import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DB_LOCK_DEFAULTS, DbLockOptionsError, resolveOptions } from '../../lib/index.js';

describe('liveness options', () => {
  it('defaults: shutdownTimeoutMs 10 s, janitor every 30 s, 7 days of log, batches of 1000, idle keys 1 h', () => {
    const options = resolveOptions({});
    assert.equal(options.shutdownTimeoutMs, 10_000);
    assert.deepEqual(options.janitor, { intervalMs: 30_000, logRetentionMs: 604_800_000, batchSize: 1000, idleKeyMs: 3_600_000 });
    assert.equal(DB_LOCK_DEFAULTS.shutdownTimeoutMs, 10_000);
    assert.ok(Object.isFrozen(DB_LOCK_DEFAULTS.janitor));
  });

  it('accepts janitor: false, 0 and Infinity where they mean something', () => {
    assert.equal(resolveOptions({ janitor: false }).janitor, false);
    assert.equal(resolveOptions({ shutdownTimeoutMs: 0 }).shutdownTimeoutMs, 0);
    const j = resolveOptions({ janitor: { logRetentionMs: Infinity, idleKeyMs: 0 } }).janitor;
    assert.ok(j);
    assert.equal(j.logRetentionMs, Infinity);
    assert.equal(j.idleKeyMs, 0);
  });

  it('lists every bad liveness option in one error', () => {
    assert.throws(
      () => resolveOptions({ shutdownTimeoutMs: -1, janitor: { intervalMs: 5, batchSize: 0, idleKeyMs: 'soon', extra: 1 } }),
      (e: unknown) => {
        assert.ok(e instanceof DbLockOptionsError);
        const text = e.problems.join('\n');
        for (const name of ['shutdownTimeoutMs', 'janitor.intervalMs', 'janitor.batchSize', 'janitor.idleKeyMs', 'janitor.extra'])
          assert.match(text, new RegExp(name.replace('.', '\\.')));
        assert.equal(e.problems.length, 5);
        return true;
      },
    );
    assert.throws(() => resolveOptions({ shutdownTimeoutMs: Infinity }), DbLockOptionsError, 'a shutdown wait must end');
    assert.throws(() => resolveOptions({ shutdownTimeoutMs: 2 ** 31 }), DbLockOptionsError, 'beyond the timer range');
  });
});
