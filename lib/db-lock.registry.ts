import { DbLockNotInitializedError } from './errors/db-lock-not-initialized.error.js';
import type { LockService } from './lock.service.js';

const services = new Map<string, LockService>();

/**
 * Where decorators find their LockService at call time, by DataSource name. A LockService
 * registers itself when its module has initialised and leaves on shutdown. Static on purpose:
 * decorators are applied when classes load, before any module exists.
 */
export const LockServiceRegistry = Object.freeze({
  register(name: string, service: LockService): void {
    services.set(name, service);
  },
  /** Removes `service` if it is still the one registered under `name`. */
  unregister(name: string, service: LockService): void {
    if (services.get(name) === service) services.delete(name);
  },
  get(name: string): LockService {
    const service = services.get(name);
    if (!service) throw new DbLockNotInitializedError(name);
    return service;
  },
  /** Forgets every service. For test suites that build many apps in one process. */
  reset(): void {
    services.clear();
  },
});
