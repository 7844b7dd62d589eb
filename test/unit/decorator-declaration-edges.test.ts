import 'reflect-metadata';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DbLockModule, DbLockOptionsError, LockServiceRegistry, Semaphore, WriteLock } from '../../lib/index.js';
import { DbLockTestingModule } from '../../lib/testing/index.js';
import { fakeLockService } from '../support/fake-lock-service.js';

describe('decorator key templates and registration validation', () => {
  afterEach(() => LockServiceRegistry.reset());

  it('a template may name an argument that a rest parameter receives ({2} of (a, ...rest))', async () => {
    const calls = fakeLockService();
    let Jobs: (new () => { tag(group: string, ...ids: string[]): Promise<void> }) | undefined;
    // A rest parameter takes any number of arguments: {2} is not "past the method's parameters".
    assert.doesNotThrow(() => {
      class RestJobs {
        @WriteLock('tag:{0}:{2}') async tag(_group: string, ..._ids: string[]): Promise<void> {}
      }
      Jobs = RestJobs;
    });
    await new Jobs!().tag('g', 'first', 'second');
    assert.deepEqual(
      calls.map((c) => c.keys),
      ['tag:g:second'],
    );
  });

  it('a rest-only method: {1} names the second argument', async () => {
    const calls = fakeLockService();
    let Jobs: (new () => { pair(...ids: string[]): Promise<void> }) | undefined;
    assert.doesNotThrow(() => {
      class RestOnly {
        @WriteLock('pair:{0}:{1}') async pair(..._ids: string[]): Promise<void> {}
      }
      Jobs = RestOnly;
    });
    await new Jobs!().pair('a', 'b');
    assert.deepEqual(
      calls.map((c) => c.keys),
      ['pair:a:b'],
    );
  });

  it('dataSourceName: null is refused by DbLockModule as it is by DbLockTestingModule (parity)', () => {
    assert.throws(() => DbLockTestingModule.forRoot({ dataSourceName: null as never }), DbLockOptionsError, 'testing module refuses it');
    assert.throws(
      () => DbLockModule.forRoot({ dataSourceName: null as never }),
      DbLockOptionsError,
      'forRoot accepts null as if it were the default',
    );
    assert.throws(
      () => DbLockModule.forRootAsync({ useFactory: () => ({}), dataSourceName: null as never }),
      DbLockOptionsError,
      'forRootAsync accepts null as if it were the default',
    );
  });

  it("@Semaphore refuses an unknown option 'key' when the class loads, as @WriteLock does (it would be silently ignored)", () => {
    assert.throws(
      () => {
        class Keyed {
          @WriteLock('w', { key: 'other' } as never) async m(): Promise<void> {}
        }
        return Keyed;
      },
      DbLockOptionsError,
      '@WriteLock refuses it',
    );
    assert.throws(
      () => {
        class Keyed {
          @Semaphore('export:{0}', 2, { key: 'other' } as never) async m(_tenant: string): Promise<void> {}
        }
        return Keyed;
      },
      DbLockOptionsError,
      '@Semaphore accepts it and drops it',
    );
  });
});
