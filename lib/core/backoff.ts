/**
 * Pause before the next try of a waiting caller: exponential from `minMs` to `maxMs` with
 * "equal jitter" (half fixed, half random), so waiters in different processes spread out
 * instead of polling in step.
 */
export function backoffDelay(failedTries: number, minMs: number, maxMs: number, random = Math.random): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(failedTries, 20));
  return ceiling / 2 + random() * (ceiling / 2);
}
