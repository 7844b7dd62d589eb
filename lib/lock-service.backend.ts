import type { Logger } from '@nestjs/common';
import type { JanitorReport } from './background/janitor.js';
import type { CallChain } from './core/call-chain.js';
import type { LockInfo } from './core/lock-handle.js';
import type { LockTarget } from './core/lock-key.js';
import type { LockObserver } from './core/lock-observer.js';
import type { LockRuntime } from './core/lock-runtime.js';
import type { LockService } from './lock.service.js';
import type { ForcedReleaseHolder, LockList } from './store/admin.js';
import type { RoundTripPurpose } from './store/lock-store.js';

/**
 * What a running LockService stands on: the shared call chain, runtime and observer, plus where
 * the locks live (the admin reads and writes, background work, connections). Built at module
 * init, torn down at shutdown. The MySQL/MariaDB backend is the default; the testing module's
 * keeps the locks in memory behind the same runtime.
 */
export interface LockServiceBackend {
  readonly observer: LockObserver;
  readonly runtime: LockRuntime;
  readonly chain: CallChain;
  /** What `lockService.manager` says outside a fenced transaction, when the backend has its own reason. */
  readonly managerMissing?: string;
  inspect(key: string, target: LockTarget): Promise<LockInfo>;
  listLocks(namespace: string, limit: number, after: string): Promise<LockList>;
  /** Ends every live holding of the key with `note`; the service then tells the runtime and the observer. */
  forceRelease(target: LockTarget, note: string): Promise<ForcedReleaseHolder[]>;
  runJanitor(): Promise<JanitorReport>;
  roundTrips(): Record<RoundTripPurpose, number>;
  /** Starts background work (application bootstrap). */
  start(): void;
  /** Stops background work (first step of shutdown). */
  stop(): Promise<void>;
  /** Frees what the backend keeps open, after the runtime closed. */
  close(): Promise<void>;
}

/** Builds a backend for a service at module init. */
export type LockBackendFactory = (service: LockService, logger: Logger) => Promise<LockServiceBackend>;

const chosen = new WeakMap<LockService, LockBackendFactory>();

/** Makes `service` run on the backend `factory` builds instead of the database (the testing module). */
export function useBackend(service: LockService, factory: LockBackendFactory): void {
  chosen.set(service, factory);
}

/** The backend factory chosen for `service`, if not the default. */
export function chosenBackend(service: LockService): LockBackendFactory | undefined {
  return chosen.get(service);
}
