import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { splitProRata } from '../../sample-app/lending/pro-rata.js';

/** The sample's repayment split: whole cents, always exactly the amount. */
describe('sample app: splitProRata', () => {
  it('splits in proportion and gives the leftover cents to the largest remainders', () => {
    assert.deepEqual(splitProRata(500, [4, 3, 2, 1]), [200, 150, 100, 50]);
    assert.deepEqual(splitProRata(1001, [2, 2, 1]), [401, 400, 200]);
    assert.deepEqual(splitProRata(1, [1, 1, 1]), [1, 0, 0]);
    assert.deepEqual(splitProRata(2, [1, 1, 1]), [1, 1, 0]);
  });

  it('never creates or loses a cent, even past 2^53 intermediate products', () => {
    const weights = [25_000_000, 5_000_000, 3, 7_777_777];
    for (const cents of [1, 7, 99, 12_345, 99_999_999, 100_000_000]) {
      const parts = splitProRata(cents, weights);
      assert.equal(
        parts.reduce((a, b) => a + b, 0),
        cents,
      );
      assert.ok(parts.every((p) => Number.isInteger(p) && p >= 0));
    }
  });
});
