/**
 * Brand every error of this library carries: the names of its classes, own class first, up to
 * and including DbLockError (e.g. `['LockTimeoutError', 'DbLockError']`). `Symbol.for`, so the
 * ES module and CommonJS builds of the package (and two installed copies) read the same brand.
 */
const BRAND = Symbol.for('nestjs-db-lock.error');

type Branded = { readonly [BRAND]?: unknown };

/**
 * Base class of every error this library throws. `name` is the subclass's name so logs and
 * `instanceof`-free checks (`err.name === 'LockTimeoutError'`) both work, and `cause` is kept.
 * Not an HttpException: locks run in crons and queue consumers too (see the sample app's
 * exception filter for an HTTP mapping).
 *
 * `instanceof` works across the package's two builds: an app that loads both the ES module and
 * the CommonJS build has two `LockTimeoutError` classes, and `err instanceof LockTimeoutError`
 * is true whichever build created `err` (see `Symbol.hasInstance` below).
 */
export class DbLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    Object.defineProperty(this, BRAND, { value: Object.freeze(classNames(new.target)), enumerable: false });
  }

  /**
   * `value instanceof C` for DbLockError and every subclass `C`. True when `C.prototype` is on
   * `value`'s prototype chain (the usual rule), or when `value` is an error of this library from
   * another build or copy whose class chain contains a class of `C`'s name: a LockTimeoutError
   * from the CommonJS build is an instance of the ES module build's LockTimeoutError and
   * DbLockError, never of its LockLostError. Objects without the brand only match the usual way.
   */
  static override [Symbol.hasInstance]<T>(this: { readonly prototype: T; readonly name: string }, value: unknown): value is T {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    if (typeof value !== 'object' || value === null) return false;
    const names = (value as Branded)[BRAND];
    return Array.isArray(names) && names.includes(this.name);
  }
}

/** The class names from `target` up to DbLockError, both included. */
function classNames(target: abstract new (...args: never[]) => unknown): string[] {
  const names: string[] = [];
  for (let current: unknown = target; typeof current === 'function' && current !== Error; current = Object.getPrototypeOf(current))
    names.push(current.name);
  return names;
}
