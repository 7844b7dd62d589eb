import 'reflect-metadata';
import { DB_LOCK_METADATA } from '../db-lock.constants.js';
import { describe } from '../core/option-checks.js';
import { LockServiceRegistry } from '../db-lock.registry.js';
import { DbLockError } from '../errors/db-lock.error.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import type { LockMode } from '../core/lock-mode.js';
import { checkRunLockedOptions, type RunLockedOptions } from '../core/locked-call.options.js';
import { MAX_LOCK_NAME_LENGTH } from '../core/lock-request.js';
import { compileLockKeys, type LockKeySource } from './lock-key-template.js';
import { settle } from '../core/settle.js';

/** Options of `@DistributedLock({...})`; `@ReadLock`/`@WriteLock` take the same minus `key` and `mode`. */
export interface DistributedLockOptions<A extends unknown[] = any[]> extends RunLockedOptions {
  /** The key(s): see LockKeySource. Default: 'ClassName.methodName' (in the module's namespace). */
  key?: LockKeySource<A>;
  /**
   * DataSource whose DbLockModule serves this lock. Default: the only DbLockModule of the app,
   * whatever its DataSource's name (DbLockAmbiguousDataSourceError at call time if there are several).
   */
  dataSourceName?: string;
}

/** What the lock decorators record on the wrapped method (Reflect metadata DB_LOCK_METADATA). */
export interface LockDecoratorMetadata {
  /** Which decorator put it there ('DistributedLock', 'ReadLock', 'WriteLock' or 'Semaphore'). */
  readonly decorator: string;
  /** `@Semaphore`'s limit; undefined for a lock. */
  readonly limit?: number;
  /** The key source as declared; undefined: ClassName.methodName. */
  readonly key: LockKeySource | undefined;
  /** The lock options as declared. */
  readonly options: Readonly<RunLockedOptions>;
  /** The DataSource the decorator names; undefined: the only DbLockModule of the app serves it. */
  readonly dataSourceName: string | undefined;
}

/** A method a lock decorator accepts: async (the lock is held until its promise settles). */
export type LockableMethod<A extends unknown[]> = (...args: [...A, ...any[]]) => Promise<unknown>;

/** Decorator for a method whose call resolves to the method's result. */
export type LockMethodDecorator<A extends unknown[] = any[]> = <T extends LockableMethod<A>>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => void;

/**
 * Decorator with `onLocked: 'skip'`: the call may resolve `undefined` without running the method,
 * so the method must say so in its type (`Promise<T | undefined>` or `Promise<void>`).
 */
export type SkippingLockMethodDecorator<A extends unknown[] = any[]> = <T extends LockableMethod<A>>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => SkipNeedsUndefined<T>;

/**
 * What a decorator with `onLocked: 'skip'` returns: `void` when the method's promise admits
 * `undefined` (a skipped call resolves `undefined`), otherwise a type whose only property names the
 * fix, so the mistake is a compile error at the decorator.
 */
export type SkipNeedsUndefined<T> = T extends (...args: any[]) => Promise<infer R>
  ? undefined extends R
    ? void
    : {
        /** The fix, as a compile error: the method must be declared as returning Promise<T | undefined>. */
        "onLocked 'skip' resolves undefined when the lock is taken: declare the method as returning Promise<T | undefined>": never;
      }
  : void;

const DECORATOR_KEYS = ['key', 'dataSourceName'] as const;

/**
 * Builds a lock decorator. It wraps the method where it is declared (so every caller goes
 * through the lock: other providers, `this.method()`, the router, @Cron, event and message
 * handlers), resolves LockService at call time from LockServiceRegistry, and forwards to
 * `LockService.runLocked()`: no lock logic lives here. Everything about the declaration is
 * checked when the class loads.
 */
export function createLockDecorator(
  decorator: string,
  key: unknown,
  options: Record<string, unknown>,
  /** `@Semaphore`: forwards to `LockService.runSemaphore()` with this limit instead. */
  semaphoreLimit?: number,
): (target: object, propertyKey: string | symbol, descriptor: PropertyDescriptor) => void {
  return (target, propertyKey, descriptor) => {
    const className = typeof target === 'function' ? target.name : target.constructor.name;
    const where = `${className}.${String(propertyKey)}`;
    const original: unknown = descriptor?.value;
    if (typeof original !== 'function')
      throw new DbLockError(`@${decorator} can only decorate methods; ${where} is not a method (getter, setter or field).`);
    if (Reflect.hasMetadata(DB_LOCK_METADATA, original)) {
      const first = Reflect.getMetadata(DB_LOCK_METADATA, original) as LockDecoratorMetadata;
      throw new DbLockError(
        `${where} has two lock decorators (@${first.decorator} and @${decorator}). Use one; it can take several keys (an array).`,
      );
    }
    checkReturnType(decorator, where, target, propertyKey);

    const problems: string[] = [];
    checkRunLockedOptions(problems, options, DECORATOR_KEYS);
    const dataSourceName = options.dataSourceName;
    if (dataSourceName !== undefined && (typeof dataSourceName !== 'string' || dataSourceName.length === 0))
      problems.push(`dataSourceName must be a non-empty string, got ${describe(dataSourceName)}`);
    if (problems.length > 0) throw new DbLockOptionsError(problems, `@${decorator} options of ${where}`);

    const parameterTypes = Reflect.getMetadata('design:paramtypes', target, propertyKey) as unknown[] | undefined;
    // A rest parameter takes any number of arguments, and `length` does not count it (nor a defaulted one): no bound then.
    const rest = parameterTypes !== undefined && original.length < parameterTypes.length;
    const keyOf = compileLockKeys(key ?? where, where, rest ? undefined : parameterTypes?.length);
    const callOptions: RunLockedOptions = Object.freeze(
      Object.fromEntries(Object.entries(options).filter(([name, value]) => value !== undefined && !DECORATOR_KEYS.includes(name as never))),
    );
    // Metrics name the lock by its declaration (the template, never the key filled in per call).
    const forwarded: RunLockedOptions = Object.freeze({ ...callOptions, name: callOptions.name ?? declaredName(key, where) });
    const method = original as (...args: unknown[]) => unknown;
    const notReady = `It was called through @${decorator} on ${where}.`;

    // Not an async function (its frame would cost promises and microtask hops on every call), yet
    // it always answers with a promise: a bad key or a missing module rejects, never throws.
    const locked = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      return settle(() => {
        // Looked up per call: modules register when the app initialises, long after classes load.
        const service = LockServiceRegistry.resolve(dataSourceName as string | undefined, notReady);
        const run = () => method.apply(this, args);
        if (semaphoreLimit !== undefined) return service.runSemaphore(keyOf(args, this) as string, semaphoreLimit, run, forwarded);
        return service.runLocked(keyOf(args, this), run, forwarded);
      });
    };

    // Other decorators (@Get, @Cron, @OnEvent, @EventPattern...) keep their metadata on the function
    // itself: copy it all, whichever side of this decorator they were written on.
    for (const metadataKey of Reflect.getOwnMetadataKeys(method))
      Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, method), locked);
    Object.defineProperty(locked, 'name', { value: method.name, configurable: true });
    Object.defineProperty(locked, 'length', { value: method.length, configurable: true });
    const metadata: LockDecoratorMetadata = Object.freeze({
      decorator,
      limit: semaphoreLimit,
      key: key as LockKeySource | undefined,
      options: callOptions,
      dataSourceName: dataSourceName as string | undefined,
    });
    Reflect.defineMetadata(DB_LOCK_METADATA, metadata, locked);
    descriptor.value = locked;
  };
}

/** The lock is held until the method's promise settles: a method known to return something else is refused. */
function checkReturnType(decorator: string, where: string, target: object, propertyKey: string | symbol): void {
  const returnType: unknown = Reflect.getMetadata('design:returntype', target, propertyKey);
  if (typeof returnType !== 'function' || returnType === Promise || returnType === Object) return;
  throw new DbLockError(
    `@${decorator} on ${where}: the method must be async (return a Promise), because the lock is held until that ` +
      `promise settles; it is declared to return ${returnType.name || 'a non-Promise value'}.`,
  );
}

/** Default `lock.name` of a decorated method: its key template(s), or 'ClassName.methodName' for a key function or none. */
function declaredName(key: unknown, where: string): string {
  const name = typeof key === 'string' ? key : Array.isArray(key) ? key.join(',') : where;
  return name.length > MAX_LOCK_NAME_LENGTH ? name.slice(0, MAX_LOCK_NAME_LENGTH) : name;
}

/** The lock decorator settings recorded on a method, if it has one. */
export function getLockMetadata(method: unknown): LockDecoratorMetadata | undefined {
  return typeof method === 'function' ? (Reflect.getMetadata(DB_LOCK_METADATA, method) as LockDecoratorMetadata | undefined) : undefined;
}

/** Shared by the positional forms: mode and timeout as options. */
export function positionalOptions(mode: LockMode | undefined, timeoutMs: number | undefined): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  if (mode !== undefined) options.mode = mode;
  if (timeoutMs !== undefined) options.timeoutMs = timeoutMs;
  return options;
}
