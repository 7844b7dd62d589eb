import { DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
import { DbLockAmbiguousDataSourceError } from './errors/db-lock-data-source.error.js';
import { DbLockNotInitializedError } from './errors/db-lock-not-initialized.error.js';
import type { LockService } from './lock.service.js';

/**
 * The process-wide home of the registry. The package ships an ES module build and a CommonJS
 * build; an app can load both (its own code through `require`, a dependency through `import`).
 * Each build then has its own copy of this file, so a module-level Map would split the registry
 * in two and a decorator loaded through one build would not find a LockService registered
 * through the other. Both copies keep the Map on `globalThis` under this `Symbol.for` key, shared
 * by every copy in the realm. The version suffix changes when the Map's shape, or what a decorator
 * calls on a registered service (`runLocked`), changes incompatibly (v2: a list per name).
 */
const REGISTRY_KEY = Symbol.for('nestjs-db-lock.registry.v2');

/**
 * The running services by DataSource name, the latest registered last. Several apps in one process
 * (two test modules in one Jest file) may each run one for the same name: the latest serves the
 * decorators, and when it shuts down the one before it serves them again.
 */
type ServiceMap = Map<string, LockService[]>;

function sharedServices(): ServiceMap {
  const holder = globalThis as typeof globalThis & { [REGISTRY_KEY]?: ServiceMap };
  const existing = holder[REGISTRY_KEY];
  if (existing instanceof Map) return existing;
  const created: ServiceMap = new Map();
  // Not enumerable and not writable: nothing replaces the Map that another copy already holds.
  Object.defineProperty(globalThis, REGISTRY_KEY, { value: created, enumerable: false, writable: false, configurable: false });
  return created;
}

const services = sharedServices();

/**
 * Where decorators find their LockService at call time, by DataSource name. A LockService
 * registers itself when its module has initialised and leaves on shutdown. Static on purpose:
 * decorators are applied when classes load, before any module exists. Shared by the ES module
 * and CommonJS builds of the package (see REGISTRY_KEY).
 */
export const LockServiceRegistry = Object.freeze({
  /** Registers `service` under a DataSource name (done by the module when it initialises). */
  register(name: string, service: LockService): void {
    services.set(name, [...(services.get(name) ?? []).filter((s) => s !== service), service]);
  },
  /** Removes `service` from those registered under `name`. */
  unregister(name: string, service: LockService): void {
    const left = (services.get(name) ?? []).filter((s) => s !== service);
    if (left.length > 0) services.set(name, left);
    else services.delete(name);
  },
  /** The LockService registered under `name`; DbLockNotInitializedError when there is none. */
  get(name: string): LockService {
    return lookup(name, '');
  },
  /**
   * The service a lock decorator uses: the one registered under `name` when it names one;
   * otherwise the only registered service, whatever its DataSource's name.
   * @param detail appended to the error message (which method asked).
   * @throws DbLockNotInitializedError when none is registered (under `name`);
   *   DbLockAmbiguousDataSourceError when `name` is undefined and several are registered.
   */
  resolve(name: string | undefined, detail = ''): LockService {
    if (name !== undefined) return lookup(name, detail);
    if (services.size === 1) return latest(services.values().next().value!);
    if (services.size === 0) throw new DbLockNotInitializedError(DEFAULT_DATA_SOURCE_NAME, detail);
    throw new DbLockAmbiguousDataSourceError([...services.keys()].sort(), detail);
  },
  /** Names of the DataSources whose LockService is registered now. */
  names(): string[] {
    return [...services.keys()].sort();
  },
  /** Forgets every service. For test suites that build many apps in one process. */
  reset(): void {
    services.clear();
  },
});

function latest(list: readonly LockService[]): LockService {
  return list[list.length - 1]!;
}

function lookup(name: string, detail: string): LockService {
  const list = services.get(name);
  if (list) return latest(list);
  const running =
    services.size === 0
      ? ''
      : `DbLockModule runs for: ${[...services.keys()]
          .sort()
          .map((n) => `'${n}'`)
          .join(', ')}.`;
  throw new DbLockNotInitializedError(name, [detail, running].filter(Boolean).join(' '));
}
