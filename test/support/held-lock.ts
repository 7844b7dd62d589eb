import type { LockHandle, LockKeys, LockOptions, LockService } from '../../lib/index.js';

/** A locked call kept open until `release()`; `value` is what `inside` answered once the keys were held. */
export interface HeldCall<T> {
  readonly release: () => void;
  /** The call's settlement (rejects as the call does). */
  readonly done: Promise<unknown>;
  readonly value: T;
}

/** Takes `keys` with `withLock` and keeps them until released; resolves once held (after `inside` ran in the hold). */
export async function holdUntilReleased<T = undefined>(
  locks: LockService,
  keys: LockKeys,
  options: LockOptions = {},
  inside: (handle: LockHandle) => Promise<T> = async () => undefined as T,
): Promise<HeldCall<T>> {
  let release!: () => void;
  let held!: (value: T) => void;
  const heldNow = new Promise<T>((resolve) => (held = resolve));
  const done = locks.withLock(
    keys,
    async (handle) => {
      held(await inside(handle));
      await new Promise<void>((resolve) => (release = resolve));
    },
    options,
  );
  // A call that fails before it holds must not leave the caller waiting for `heldNow`.
  const value = await Promise.race([heldNow, done.then(() => Promise.reject(new Error('the call ended before it held the keys')))]);
  return { release: () => release(), done, value };
}
