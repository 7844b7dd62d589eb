import 'reflect-metadata';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DbLockAmbiguousDataSourceError, DbLockNotInitializedError, getLockMetadata, LockServiceRegistry, WriteLock } from '../../lib/index.js';
import { fakeLockService } from '../support/fake-lock-service.js';

describe('lock decorators: which LockService serves a call', () => {
  afterEach(() => LockServiceRegistry.reset());

  it('throws DbLockNotInitializedError before the module is ready, naming the method', async () => {
    class Early {
      @WriteLock('early') async m(): Promise<string> {
        return 'ran';
      }
      @WriteLock('other', { dataSourceName: 'reports' }) async n(): Promise<string> {
        return 'ran';
      }
    }
    await assert.rejects(new Early().m(), (e: unknown) => e instanceof DbLockNotInitializedError && /@WriteLock on Early\.m/.test(e.message));
    fakeLockService('default');
    assert.equal(await new Early().m(), 'ran');
    await assert.rejects(new Early().n(), (e: unknown) => e instanceof DbLockNotInitializedError && e.dataSourceName === 'reports');
  });

  it('a decorator naming no DataSource uses the only registered service, whatever its name, and refuses to guess among several', async () => {
    class Unnamed {
      @WriteLock('u') async m(): Promise<string> {
        return 'ran';
      }
      @WriteLock('n', { dataSourceName: 'billing' }) async named(): Promise<string> {
        return 'ran';
      }
    }
    assert.equal(getLockMetadata(Unnamed.prototype.m)!.dataSourceName, undefined);
    assert.equal(getLockMetadata(Unnamed.prototype.named)!.dataSourceName, 'billing');
    const billing = fakeLockService('billing');
    assert.equal(await new Unnamed().m(), 'ran');
    assert.equal(billing.length, 1, 'served by the only service, named billing');
    fakeLockService('reports');
    await assert.rejects(new Unnamed().m(), (e: unknown) => {
      assert.ok(e instanceof DbLockAmbiguousDataSourceError, String(e));
      assert.deepEqual(e.registeredNames, ['billing', 'reports']);
      assert.match(e.message, /@WriteLock on Unnamed\.m/);
      return true;
    });
    assert.equal(await new Unnamed().named(), 'ran', 'a named decorator is unaffected');
    assert.deepEqual(LockServiceRegistry.names(), ['billing', 'reports']);
    class Audit {
      @WriteLock('x', { dataSourceName: 'audit' }) async m(): Promise<void> {}
    }
    await assert.rejects(
      new Audit().m(),
      (e: unknown) => e instanceof DbLockNotInitializedError && /DbLockModule runs for: 'billing', 'reports'/.test(e.message),
    );
  });
});
