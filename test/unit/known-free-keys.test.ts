import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KNOWN_FREE_FOR_MS, KnownFreeKeys } from '../../lib/store/known-free-keys.js';
import { CLAIMS_KEPT_MS } from '../../lib/store/mysql/janitor.sql.js';
import type { GrantInput } from '../../lib/store/mysql/grant.sql.js';
import type { GrantOutcome } from '../../lib/store/lock-store.js';

/**
 * What a process knows free, and for how long: only its own exclusive single-key holds, only once
 * their end is durable, and only for a minute, well inside the ten minutes the janitor keeps the
 * claims (and key rows) that would refute a stale one-INSERT grant.
 */
describe('KnownFreeKeys', () => {
  const realNow = performance.now.bind(performance);
  let offsetMs = 0;
  performance.now = () => realNow() + offsetMs;
  afterEach(() => {
    offsetMs = 0;
  });

  const input = (mode: 'read' | 'write', keys = ['k']): GrantInput =>
    ({ targets: keys.map((key) => ({ key, storedKey: key, bytes: Buffer.from(key), mode })) }) as unknown as GrantInput;
  const granted = (token: number, keys = ['k']): GrantOutcome => ({
    granted: true,
    rows: keys.map((storedKey, i) => ({ id: `row-${token}-${i}`, storedKey, fencingToken: token, expiresAt: new Date() })),
    reclaimed: 0,
    serverWaitMs: 0,
  });

  it('a key is known free at its token once our exclusive hold ended durably, and only then', () => {
    const known = new KnownFreeKeys();
    known.granted(input('write'), granted(7));
    assert.equal(known.tokenOf('k'), undefined, 'not while held');
    assert.equal(known.ended(['row-7-0'], 1), 1);
    assert.equal(known.tokenOf('k'), 7);
  });

  it('an end that did not reach every row (taken over meanwhile) teaches nothing', () => {
    const known = new KnownFreeKeys();
    known.granted(input('write'), granted(7));
    known.ended(['row-7-0'], 0);
    assert.equal(known.tokenOf('k'), undefined);
  });

  it('readers and several keys are never known free (others may hold beside them)', () => {
    const known = new KnownFreeKeys();
    known.granted(input('read'), granted(3));
    known.ended(['row-3-0'], 1);
    known.granted(input('write', ['a', 'b']), granted(4, ['a', 'b']));
    known.ended(['row-4-0', 'row-4-1'], 2);
    assert.deepEqual([known.tokenOf('k'), known.tokenOf('a'), known.tokenOf('b')], [undefined, undefined, undefined]);
  });

  it('forgotten after a minute, well inside what the janitor keeps', () => {
    assert.ok(KNOWN_FREE_FOR_MS * 5 <= CLAIMS_KEPT_MS, `${KNOWN_FREE_FOR_MS} ms known free, ${CLAIMS_KEPT_MS} ms of claims kept`);
    const known = new KnownFreeKeys();
    known.granted(input('write'), granted(9));
    known.ended(['row-9-0'], 1);
    offsetMs = KNOWN_FREE_FOR_MS - 1_000;
    assert.equal(known.tokenOf('k'), 9);
    offsetMs = KNOWN_FREE_FOR_MS + 1;
    assert.equal(known.tokenOf('k'), undefined);
    offsetMs = 0;
    assert.equal(known.tokenOf('k'), undefined, 'and stays forgotten');
  });

  it('any later grant of ours moves it on', () => {
    const known = new KnownFreeKeys();
    known.granted(input('write'), granted(9));
    known.ended(['row-9-0'], 1);
    known.granted(input('read'), granted(10));
    assert.equal(known.tokenOf('k'), undefined);
  });
});
