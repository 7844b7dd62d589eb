import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileLockKeys, compileTemplate } from '../../lib/decorators/lock-key-template.js';
import { DbLockOptionsError, InvalidLockKeyError } from '../../lib/index.js';

const where = 'Svc.m';

describe('lock key templates', () => {
  it('renders positions and property paths', () => {
    assert.equal(compileTemplate('loan:{0}', where, 1)([7]), 'loan:7');
    assert.equal(compileTemplate('order:{0.id}', where, 1)([{ id: 'A1' }]), 'order:A1');
    assert.equal(compileTemplate('{1.customer.id}/{0}', where, 2)(['x', { customer: { id: 9n } }]), '9/x');
    assert.equal(compileTemplate('list:{0.items.1}', where, 1)([{ items: ['a', 'b'] }]), 'list:b');
    assert.equal(compileTemplate('plain', where, 0)([]), 'plain');
    assert.equal(compileTemplate('{{literal}}:{0}', where, 1)(['v']), '{literal}:v');
  });

  it('rejects malformed templates when compiled (class load), naming the method', () => {
    for (const bad of ['a:{', 'a:}', 'a:{}', 'a:{x}', 'a:{0.}', 'a:{-1}', 'a:{0..id}', 'a:{0.__proto__}', 'a:{0.constructor}']) {
      assert.throws(
        () => compileTemplate(bad, where, 1),
        (e: unknown) => e instanceof DbLockOptionsError && e.message.includes(where),
        bad,
      );
    }
    assert.throws(() => compileTemplate('a:{2}', where, 2), /names argument 2, but the method declares 2 parameter/);
    // Unknown parameter count (no design metadata): no position check.
    assert.equal(compileTemplate('a:{2}', where, undefined)([0, 0, 'z']), 'a:z');
  });

  it('refuses values that would make a valid but wrong key', () => {
    const render = compileTemplate('order:{0.id}', where, 1);
    for (const args of [[undefined], [{}], [{ id: null }], [{ id: {} }], [{ id: '' }], [{ id: NaN }], [{ id: true }], [null]]) {
      assert.throws(() => render(args), InvalidLockKeyError, JSON.stringify(args));
    }
  });

  it('compiles arrays and functions; rejects other key types', () => {
    assert.deepEqual(compileLockKeys(['a:{0}', 'b:{1}'], where, 2)([1, 2], undefined), ['a:1', 'b:2']);
    const self = { prefix: 'p' };
    assert.equal(
      compileLockKeys(
        function (this: typeof self, id: number) {
          return `${this.prefix}:${id}`;
        },
        where,
        1,
      )([3], self),
      'p:3',
    );
    assert.throws(() => compileLockKeys([], where, 0), DbLockOptionsError);
    assert.throws(() => compileLockKeys([1], where, 0), DbLockOptionsError);
    assert.throws(() => compileLockKeys(42, where, 0), DbLockOptionsError);
    assert.throws(() => compileLockKeys(null, where, 0), DbLockOptionsError);
  });
});
