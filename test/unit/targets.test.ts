import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DbLockOptionsError, InvalidLockKeyError, MAX_KEY_LENGTH, MAX_KEYS_PER_LOCK } from '../../lib/index.js';
import { resolveTargets } from '../../lib/core/lock-key.js';

const summary = (targets: ReturnType<typeof resolveTargets>): string[] => targets.map((t) => `${t.storedKey}/${t.mode}`);

describe('resolveTargets', () => {
  it('takes one key in the default mode, namespaced', () => {
    const [target, ...rest] = resolveTargets('a', 'read', 'ns');
    assert.equal(rest.length, 0);
    assert.equal(target!.key, 'a');
    assert.equal(target!.storedKey, 'ns:a');
    assert.deepEqual(target!.bytes, Buffer.from('ns:a'));
    assert.equal(target!.mode, 'read');
    assert.ok(Object.isFrozen(target));
    assert.equal(resolveTargets('a', 'write', '')[0]!.storedKey, 'a');
  });

  it('sorts by stored UTF-8 bytes, the one order every process uses', () => {
    assert.deepEqual(summary(resolveTargets(['b', 'a', 'B', 'é', 'z'], 'write', '')), ['B/write', 'a/write', 'b/write', 'z/write', 'é/write']);
    // UTF-16 order would put the emoji (a surrogate pair, 0xD83D...) before U+FF41; UTF-8 bytes do not.
    assert.deepEqual(summary(resolveTargets(['😀', '\uff41'], 'write', '')), ['\uff41/write', '😀/write']);
    const one = summary(resolveTargets(['k2', 'k10', 'k1'], 'write', 'n'));
    const other = summary(resolveTargets(['k1', 'k10', 'k2'], 'write', 'n'));
    assert.deepEqual(one, other);
  });

  it('merges duplicates; a key asked for in both modes is taken for writing', () => {
    assert.deepEqual(summary(resolveTargets(['a', 'a', 'a'], 'read', '')), ['a/read']);
    const read = { key: 'a', mode: 'read' } as const;
    const write = { key: 'a', mode: 'write' } as const;
    for (const order of [
      [read, write],
      [write, read],
    ])
      assert.deepEqual(summary(resolveTargets(order, 'read', '')), ['a/write'], `${order.map((t) => t.mode).join(' then ')}`);
    assert.deepEqual(summary(resolveTargets([{ key: 'a', mode: 'read' }, 'a'], 'read', '')), ['a/read']);
    assert.deepEqual(summary(resolveTargets([{ key: 'b' }, { key: 'a', mode: 'read' }], 'write', '')), ['a/read', 'b/write']);
    // Exact comparison: look-alikes are not duplicates.
    assert.equal(resolveTargets(['k', 'K', 'k '], 'write', '').length, 3);
  });

  it(`allows ${MAX_KEYS_PER_LOCK} keys together, not more, and not none`, () => {
    const keys = Array.from({ length: MAX_KEYS_PER_LOCK }, (_, i) => `k${i}`);
    assert.equal(resolveTargets(keys, 'write', '').length, MAX_KEYS_PER_LOCK);
    assert.throws(() => resolveTargets([...keys, 'one-more'], 'write', ''), InvalidLockKeyError);
    assert.throws(() => resolveTargets([], 'write', ''), InvalidLockKeyError);
  });

  it(`allows ${MAX_KEY_LENGTH} characters (code points) including the namespace, never truncates`, () => {
    assert.equal(resolveTargets('x'.repeat(MAX_KEY_LENGTH), 'write', '')[0]!.storedKey.length, MAX_KEY_LENGTH);
    assert.throws(() => resolveTargets('x'.repeat(MAX_KEY_LENGTH + 1), 'write', ''), /at most 191 characters.*got 192/);
    assert.ok(resolveTargets('x'.repeat(MAX_KEY_LENGTH - 3), 'write', 'ns'));
    assert.throws(() => resolveTargets('x'.repeat(MAX_KEY_LENGTH - 2), 'write', 'ns'), InvalidLockKeyError);
    const emoji = '😀'.repeat(MAX_KEY_LENGTH); // 382 UTF-16 units, 764 bytes: the column's size
    assert.equal(resolveTargets(emoji, 'write', '')[0]!.bytes.length, 764);
    assert.throws(() => resolveTargets(emoji + '😀', 'write', ''), InvalidLockKeyError);
  });

  it('rejects bad keys with InvalidLockKeyError naming the reason', () => {
    const cases: [unknown, RegExp][] = [
      ['', /must not be empty/],
      [42, /expected a string/],
      [null, /expected a string/],
      [{ key: 'a' }, /expected a string/],
      [['a', 1], /must be a string/],
      [[['a']], /must be a string/],
      [[{ key: 1 }], /must be a string/],
      ['\uD800', /well-formed/],
      [['ok', 'a\uDC00'], /well-formed/],
    ];
    for (const [keys, reason] of cases) {
      assert.throws(
        () => resolveTargets(keys, 'write', ''),
        (error: unknown) => error instanceof InvalidLockKeyError && reason.test(error.reason),
        String(keys),
      );
    }
  });

  it('rejects a mode other than read/write with DbLockOptionsError', () => {
    assert.throws(() => resolveTargets([{ key: 'a', mode: 'shared' }], 'write', ''), DbLockOptionsError);
    assert.throws(() => resolveTargets('a', 'shared' as never, ''), DbLockOptionsError);
  });

  it('resolves a repeated single key once, and never mixes up namespaces, modes or keys that contain separators', () => {
    const first = resolveTargets('hot', 'write', 'ns');
    assert.equal(resolveTargets('hot', 'write', 'ns'), first, 'the same frozen targets for the same key, mode and namespace');
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first[0]));
    assert.equal(resolveTargets('hot', 'read', 'ns')[0]!.mode, 'read');
    // Keys and namespaces may hold NUL and ':': two different locks whatever a joined cache key would say.
    assert.equal(resolveTargets('b\u0000c', 'write', 'a')[0]!.storedKey, 'a:b\u0000c');
    assert.equal(resolveTargets('c', 'write', 'a\u0000b')[0]!.storedKey, 'a\u0000b:c');
    assert.equal(resolveTargets('b:c', 'write', 'a')[0]!.storedKey, 'a:b:c');
    assert.equal(resolveTargets('c', 'write', 'a:b')[0]!.storedKey, 'a:b:c');
    // Past the bound the cache starts over, and every answer stays right.
    for (let i = 0; i < 3_000; i++) assert.equal(resolveTargets(`k${i}`, 'write', 'bound')[0]!.storedKey, `bound:k${i}`);
    // Bad keys are never cached: each call still throws.
    for (let i = 0; i < 2; i++) assert.throws(() => resolveTargets('', 'write', 'ns'), InvalidLockKeyError);
    assert.throws(() => resolveTargets('a', '__proto__' as never, ''), DbLockOptionsError);
  });
});
