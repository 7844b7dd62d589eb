import type { Logger } from '@nestjs/common';
import type { LockServiceBackend } from './lock-service.backend.js';

/**
 * The shutdown sequence of a running LockService: refuse new acquisitions and reject waiting
 * callers; stop background work; wait up to `shutdownTimeoutMs` for running holders; abort the
 * signals of locks still held and release them; stop the watchdog. `unregister` runs only then
 * (holders that finished during the wait could still reach the service); the backend closes last.
 */
export async function shutDown(parts: LockServiceBackend, shutdownTimeoutMs: number, logger: Logger, unregister: () => void): Promise<void> {
  parts.runtime.beginShutdown();
  await parts.stop();
  if (!(await parts.chain.running.waitIdle(shutdownTimeoutMs))) {
    logger.warn(
      `${parts.chain.running.size} lock holder(s) still running after shutdownTimeoutMs (${shutdownTimeoutMs} ms): ` +
        'their signals are aborted and their locks released',
    );
  }
  parts.runtime.abortHeld('the lock service shut down and released it');
  await parts.runtime.close();
  unregister();
  await parts.close();
}
