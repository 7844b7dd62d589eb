import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DbLockError,
  DbLockNotInitializedError,
  DbLockOptionsError,
  InvalidLockKeyError,
  LockLostError,
  LockServiceRegistry,
  LockTimeoutError,
  type LockService,
} from '../../lib/index.js';

/**
 * What the package's two builds (ES module and CommonJS) share when an app loads both: each build
 * has its own copy of every class and of the registry module. Here a second copy of a module is
 * loaded by importing it under another URL (a query string): Node then evaluates it again, as it
 * would the other build's file. The cross-build end-to-end test (test/e2e/dual-builds-one-process.test.ts)
 * does the same with the real dist/esm and dist/cjs.
 */
async function secondCopy<T>(path: string): Promise<T> {
  return (await import(new URL(`${path}?copy=${Math.random()}`, import.meta.url).href)) as T;
}

type ErrorModule = typeof import('../../lib/errors/db-lock.error.js');
type RegistryModule = typeof import('../../lib/db-lock.registry.js');

/** The other build's error classes: another DbLockError, with subclasses of the same names. */
async function otherBuildErrors() {
  const { DbLockError: OtherDbLockError } = await secondCopy<ErrorModule>('../../lib/errors/db-lock.error.js');
  class LockTimeoutError extends OtherDbLockError {}
  class LockLostError extends OtherDbLockError {}
  assert.notEqual(OtherDbLockError, DbLockError, 'a real second copy of the class');
  return { DbLockError: OtherDbLockError, LockTimeoutError, LockLostError };
}

describe('instanceof on errors across two copies of the library', () => {
  it('within one copy: the usual rule, subclasses kept apart', () => {
    const timeout = new LockTimeoutError(['k'], 'write', 1, 1);
    const lost = new LockLostError('k', 3, 'taken over');
    assert.ok(timeout instanceof LockTimeoutError && timeout instanceof DbLockError && timeout instanceof Error);
    assert.ok(lost instanceof LockLostError && lost instanceof DbLockError);
    assert.equal(timeout instanceof LockLostError, false);
    assert.equal(lost instanceof LockTimeoutError, false);
    assert.equal(new DbLockError('x') instanceof LockTimeoutError, false, 'a base error is not a subclass instance');
    assert.equal(new DbLockOptionsError(['p']) instanceof InvalidLockKeyError, false);
  });

  it("an error from the other copy is an instance of this copy's class of the same name and of DbLockError", async () => {
    const other = await otherBuildErrors();
    const foreign = new other.LockTimeoutError('waited too long');
    assert.equal(foreign.name, 'LockTimeoutError');
    assert.ok(foreign instanceof LockTimeoutError);
    assert.ok(foreign instanceof DbLockError);
    assert.ok(foreign instanceof Error);
    assert.equal(foreign instanceof LockLostError, false, 'LockTimeoutError and LockLostError stay apart across copies');
    assert.equal(foreign instanceof DbLockOptionsError, false);
    assert.ok(new other.DbLockError('base') instanceof DbLockError);
    assert.equal(new other.DbLockError('base') instanceof LockTimeoutError, false);
  });

  it('and the other way round', async () => {
    const other = await otherBuildErrors();
    const local = new LockLostError('k', 1, 'expired');
    assert.ok(local instanceof other.LockLostError);
    assert.ok(local instanceof other.DbLockError);
    assert.equal(local instanceof other.LockTimeoutError, false);
  });

  it('user subclasses: a subclass instance is an instance of its bases, never the reverse', async () => {
    class BillingLockTimeout extends LockTimeoutError {}
    const mine = new BillingLockTimeout(['k'], 'write', 1, 1);
    assert.equal(mine.name, 'BillingLockTimeout');
    assert.ok(mine instanceof BillingLockTimeout && mine instanceof LockTimeoutError && mine instanceof DbLockError);
    assert.equal(new LockTimeoutError(['k'], 'write', 1, 1) instanceof BillingLockTimeout, false);
    const other = await otherBuildErrors();
    assert.ok(mine instanceof other.LockTimeoutError, 'its chain names LockTimeoutError');
    assert.ok(mine instanceof other.DbLockError);
    assert.equal(new other.LockTimeoutError('x') instanceof BillingLockTimeout, false);
  });

  it('objects without the brand match only the usual way, whatever their name', () => {
    const impostor = Object.assign(new Error('x'), { name: 'LockTimeoutError' });
    assert.equal(impostor instanceof LockTimeoutError, false);
    assert.equal(impostor instanceof DbLockError, false);
    assert.equal({ name: 'LockTimeoutError' } instanceof LockTimeoutError, false);
    const badBrand = { [Symbol.for('nestjs-db-lock.error')]: 'LockTimeoutError' };
    assert.equal(badBrand instanceof LockTimeoutError, false, 'the brand must be the list of class names');
    for (const value of [null, undefined, 0, 'LockTimeoutError', Symbol('x')]) assert.equal((value as unknown) instanceof DbLockError, false);
    class LockTimeoutErrorLookalike extends Error {}
    assert.equal(new LockTimeoutError(['k'], 'write', 1, 1) instanceof LockTimeoutErrorLookalike, false, 'unrelated classes keep the usual rule');
  });

  it('the brand is invisible: not enumerable, not in JSON, not a string key', () => {
    const error = new LockTimeoutError(['k'], 'read', 2, 1);
    const brand = Symbol.for('nestjs-db-lock.error');
    assert.deepEqual((error as unknown as Record<symbol, unknown>)[brand], ['LockTimeoutError', 'DbLockError']);
    assert.equal(Object.getOwnPropertyDescriptor(error, brand)?.enumerable, false);
    assert.deepEqual(Object.keys(error), ['name', 'keys', 'mode', 'waitedMs', 'timeoutMs']);
    assert.equal(JSON.stringify(error), '{"name":"LockTimeoutError","keys":["k"],"mode":"read","waitedMs":2,"timeoutMs":1}');
  });

  it('TypeScript narrows through the static Symbol.hasInstance, for classes with private constructors too', () => {
    const caught: unknown = new LockTimeoutError(['a', 'b'], 'write', 1, 1);
    if (caught instanceof LockTimeoutError)
      assert.deepEqual(caught.keys, ['a', 'b']); // compiles only if narrowed
    else assert.fail('not narrowed');
    class Sealed extends DbLockError {
      private constructor() {
        super('sealed');
      }
      static make(): Sealed {
        return new Sealed();
      }
    }
    const sealed: unknown = Sealed.make();
    assert.ok(sealed instanceof Sealed && sealed instanceof DbLockError);
    assert.equal(caught instanceof Sealed, false);
  });
});

describe('LockServiceRegistry is shared by every copy of the library', () => {
  const fake = (label: string) => ({ label }) as unknown as LockService;

  it('a service registered through one copy is found through another', async () => {
    const other = (await secondCopy<RegistryModule>('../../lib/db-lock.registry.js')).LockServiceRegistry;
    assert.notEqual(other, LockServiceRegistry, 'a real second copy of the module');
    const service = fake('reports');
    try {
      LockServiceRegistry.register('reports', service);
      assert.equal(other.get('reports'), service);
      other.unregister('reports', fake('someone else'));
      assert.equal(LockServiceRegistry.get('reports'), service, 'unregister removes only the service it is given');
      other.unregister('reports', service);
      assert.throws(() => LockServiceRegistry.get('reports'), DbLockNotInitializedError);
      other.register('a', fake('a'));
      LockServiceRegistry.reset();
      assert.throws(
        () => other.get('a'),
        (error: unknown) => error instanceof DbLockNotInitializedError && error.dataSourceName === 'a',
      );
    } finally {
      LockServiceRegistry.reset();
    }
  });

  it("lives on globalThis under Symbol.for('nestjs-db-lock.registry.v2'), not enumerable, never replaced", () => {
    const key = Symbol.for('nestjs-db-lock.registry.v2');
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, key);
    assert.ok(descriptor?.value instanceof Map);
    assert.equal(descriptor.enumerable, false);
    assert.equal(descriptor.writable, false);
    assert.equal(descriptor.configurable, false);
    assert.ok(!Object.keys(globalThis).some((name) => name.includes('lock')));
  });
});
