import type { LockTarget } from '../core/lock-key.js';

/** Same-mode keys of a row-lock take, in the one global key order (targets come sorted): one locking statement each. */
export interface KeyGroup {
  readonly mode: LockTarget['mode'];
  readonly keys: Buffer[];
  readonly stored: string[];
}

/** Runs of same-mode keys, in order. */
export function groupsOf(targets: readonly LockTarget[]): KeyGroup[] {
  const out: KeyGroup[] = [];
  for (const target of targets) {
    const last = out[out.length - 1];
    if (last && last.mode === target.mode) {
      last.keys.push(target.bytes);
      last.stored.push(target.storedKey);
    } else out.push({ mode: target.mode, keys: [target.bytes], stored: [target.storedKey] });
  }
  return out;
}
