import type { LockTarget } from './lock-key.js';

/**
 * Keys the library uses for itself (the janitor's cluster lock, the fencing floor). Their stored
 * bytes start with 0xFF, a byte that never occurs in UTF-8: user keys are always well-formed
 * text stored as UTF-8, so no user key can equal an internal key, whatever the namespace.
 * Binary comparison also puts them after every user key (`lock_key < 0xFF` = user keys only).
 */
export const INTERNAL_KEY_BYTE = 0xff;

function internalKeyBytes(name: string): Buffer {
  return Buffer.concat([Buffer.from([INTERNAL_KEY_BYTE]), Buffer.from(`nestjs-db-lock:${name}`, 'utf8')]);
}

/** A write target for an internal key. `storedKey` is the bytes as the driver reads them back. */
function internalTarget(name: string): LockTarget {
  const bytes = internalKeyBytes(name);
  return Object.freeze({ key: `(db-lock ${name})`, storedKey: bytes.toString('utf8'), bytes, mode: 'write' as const });
}

/** The janitor's cluster-wide lock: one janitor at a time. */
export const JANITOR_LOCK_TARGET = internalTarget('janitor');

/**
 * Lock-table row holding the "fencing floor": the highest fencing token of any key row the
 * janitor reaped. A key row created later starts from it, so a key's fencing tokens keep growing
 * across a reap (tokens are never reset).
 */
export const FENCING_FLOOR_KEY = internalKeyBytes('fencing-floor');

/** True for the library's own keys (never shown to users, never counted as user locks). */
export function isInternalTarget(target: LockTarget): boolean {
  return target.bytes[0] === INTERNAL_KEY_BYTE;
}
