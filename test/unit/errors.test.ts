import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DbLockError,
  DbLockNotInitializedError,
  DbLockOptionsError,
  DbLockSchemaError,
  InvalidLockKeyError,
  LockLostError,
  LockTimeoutError,
  LockUpgradeError,
} from '../../lib/index.js';

function assertShape(error: Error, name: string): void {
  assert.equal(error.name, name);
  assert.equal(error.constructor.name, name);
  assert.ok(error instanceof DbLockError);
  assert.ok(error instanceof Error);
  assert.ok(error.stack?.includes(name), 'the stack names the class');
  assert.equal(Object.prototype.toString.call(error), '[object Error]');
}

describe('error shapes', () => {
  it('DbLockError keeps its cause', () => {
    const cause = new Error('db down');
    const error = new DbLockError('failed', { cause });
    assertShape(error, 'DbLockError');
    assert.equal(error.cause, cause);
    assert.equal(error.message, 'failed');
  });

  it('LockTimeoutError: keys, key, mode, waitedMs, timeoutMs, cause', () => {
    const cause = new Error('killed');
    const error = new LockTimeoutError(['a', 'b'], 'read', 51.7, 50, { cause });
    assertShape(error, 'LockTimeoutError');
    assert.deepEqual(error.keys, ['a', 'b']);
    assert.equal(error.key, 'a');
    assert.equal(error.mode, 'read');
    assert.equal(error.waitedMs, 51.7);
    assert.equal(error.timeoutMs, 50);
    assert.equal(error.cause, cause);
    assert.match(error.message, /read lock on \['a', 'b'\] within 50 ms \(waited 52 ms\)/);
    assert.match(new LockTimeoutError(['k'], 'write', 0, 0).message, /write lock on 'k' within 0 ms/);
  });

  it('LockLostError: key, fencingToken, reason, cause', () => {
    const cause = new Error('renewal failed');
    const error = new LockLostError('k', 7, 'taken over', { cause });
    assertShape(error, 'LockLostError');
    assert.equal(error.key, 'k');
    assert.equal(error.fencingToken, 7);
    assert.equal(error.reason, 'taken over');
    assert.equal(error.cause, cause);
    assert.match(error.message, /'k' \(fencing token 7\) was lost: taken over/);
  });

  it('InvalidLockKeyError: the rejected value and the reason', () => {
    const long = 'x'.repeat(500);
    const error = new InvalidLockKeyError(long, 'too long');
    assertShape(error, 'InvalidLockKeyError');
    assert.equal(error.key, long);
    assert.equal(error.reason, 'too long');
    assert.ok(error.message.length < 200, 'a huge key is not copied into the message');
    assert.match(error.message, /\(500 chars\)/);
    const object = { key: 'a' };
    assert.equal(new InvalidLockKeyError(object, 'r').key, object);
    assert.match(new InvalidLockKeyError(null, 'r').message, /null/);
  });

  it('DbLockOptionsError: every problem, in a field and in the message', () => {
    const error = new DbLockOptionsError(['leaseMs bad', 'unknown option x']);
    assertShape(error, 'DbLockOptionsError');
    assert.deepEqual(error.problems, ['leaseMs bad', 'unknown option x']);
    assert.equal(error.message, 'Invalid DbLockModule options:\n  - leaseMs bad\n  - unknown option x');
    assert.match(new DbLockOptionsError(['p'], 'lock options').message, /^Invalid lock options:/);
  });

  it('DbLockNotInitializedError, DbLockSchemaError, LockUpgradeError', () => {
    const notReady = new DbLockNotInitializedError('reports');
    assertShape(notReady, 'DbLockNotInitializedError');
    assert.equal(notReady.dataSourceName, 'reports');
    assert.match(notReady.message, /'reports'/);
    const cause = Object.assign(new Error("Table 'x.db_lock' doesn't exist"), { errno: 1146 });
    const schema = new DbLockSchemaError('run the migration', { cause });
    assertShape(schema, 'DbLockSchemaError');
    assert.equal(schema.cause, cause);
    const upgrade = new LockUpgradeError('k');
    assertShape(upgrade, 'LockUpgradeError');
    assert.equal(upgrade.key, 'k');
  });
});
