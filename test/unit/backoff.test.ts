import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay } from '../../lib/core/backoff.js';

describe('backoffDelay', () => {
  const MIN = 10;
  const MAX = 200;

  it('grows exponentially with equal jitter, capped at the maximum', () => {
    // random() = 0 gives half the ceiling, random() -> 1 the whole ceiling.
    const cases: [failedTries: number, random: number, delay: number][] = [
      [0, 0, 5],
      [0, 1, 10],
      [1, 0, 10],
      [2, 1, 40],
      [4, 1, 160],
      [5, 1, MAX],
      [5, 0, MAX / 2],
    ];
    for (const [tries, random, delay] of cases)
      assert.equal(
        backoffDelay(tries, MIN, MAX, () => random),
        delay,
        `tries ${tries}, random ${random}`,
      );
  });

  it('stays within [min/2, max] for any number of failures and any randomness', () => {
    for (const tries of [0, 1, 3, 7, 20, 21, 1_000, 1e9, Number.MAX_SAFE_INTEGER]) {
      for (const r of [0, 0.25, 0.5, 0.999999]) {
        const delay = backoffDelay(tries, MIN, MAX, () => r);
        assert.ok(Number.isFinite(delay), `tries ${tries}`);
        assert.ok(delay >= MIN / 2 && delay <= MAX, `tries ${tries}, random ${r}: ${delay}`);
      }
    }
    for (let i = 0; i < 10_000; i++) {
      const delay = backoffDelay(i % 12, MIN, MAX);
      assert.ok(delay >= MIN / 2 && delay <= MAX, String(delay));
    }
  });

  it('never grows with more failures beyond the cap, and is monotonic in the ceiling', () => {
    let previous = 0;
    for (let tries = 0; tries < 30; tries++) {
      const ceiling = backoffDelay(tries, MIN, MAX, () => 1);
      assert.ok(ceiling >= previous);
      previous = ceiling;
    }
    assert.equal(previous, MAX);
  });

  it('spreads waiters out: jitter covers the upper half of the ceiling', () => {
    const samples = Array.from({ length: 2_000 }, () => backoffDelay(10, MIN, MAX));
    assert.ok(Math.min(...samples) < MAX * 0.6);
    assert.ok(Math.max(...samples) > MAX * 0.9);
  });
});
