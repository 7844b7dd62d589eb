/**
 * Splits `cents` over `weights` in proportion, in whole cents, exactly: the parts always add up
 * to `cents`. Each part is rounded down; the cents left over go one each to the largest
 * remainders (ties: the earlier weight), so no cent is created or lost.
 */
export function splitProRata(cents: number, weights: readonly number[]): number[] {
  const total = weights.reduce((sum, w) => sum + w, 0);
  if (total <= 0) throw new Error('splitProRata needs a positive total weight');
  // BigInt: cents x weight can pass 2^53 (1e8 cents x 2.5e7 cents of principal).
  const exact = weights.map((w) => BigInt(cents) * BigInt(w));
  const parts = exact.map((e) => Number(e / BigInt(total)));
  const remainders = exact.map((e, i) => ({ i, r: e % BigInt(total) }));
  remainders.sort((a, b) => (a.r === b.r ? a.i - b.i : a.r > b.r ? -1 : 1));
  let left = cents - parts.reduce((sum, p) => sum + p, 0);
  for (const { i } of remainders) {
    if (left === 0) break;
    parts[i]! += 1;
    left -= 1;
  }
  return parts;
}
