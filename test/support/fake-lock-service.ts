import { type LockService, LockServiceRegistry, type RunLockedOptions } from '../../lib/index.js';

/** One call a decorator forwarded to the stand-in service. */
export interface ForwardedCall {
  keys: unknown;
  options: RunLockedOptions | undefined;
}

/**
 * Registers a stand-in LockService under `name` for the decorator unit tests: it records what the
 * decorator forwards to `runLocked` and runs the method, with no database. Undo with
 * `LockServiceRegistry.reset()`.
 */
export function fakeLockService(name = 'default'): ForwardedCall[] {
  const calls: ForwardedCall[] = [];
  const service = {
    runLocked: async (keys: unknown, fn: () => unknown, options?: RunLockedOptions) => {
      calls.push({ keys, options });
      return fn();
    },
  };
  LockServiceRegistry.register(name, service as unknown as LockService);
  return calls;
}
