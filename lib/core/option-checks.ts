/** The largest delay Node's timers honour; anything larger (or NaN, or < 1) fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Validates a duration in whole milliseconds and pushes one line per problem. Timer-bound
 * durations must fit Node's timer range (NaN, < 1 or > 2^31-1 would silently fire after 1 ms).
 */
export function checkDuration(
  problems: string[],
  name: string,
  value: unknown,
  rules: { min: number; infinite?: boolean; noTimer?: boolean },
): number | undefined {
  if (value === Infinity && rules.infinite) return Infinity;
  const max = rules.noTimer ? Number.MAX_SAFE_INTEGER : MAX_TIMER_MS;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < rules.min || value > max) {
    const range = `an integer number of milliseconds from ${rules.min} to ${max}${rules.infinite ? ', or Infinity' : ''}`;
    problems.push(`${name} must be ${range}, got ${describe(value)}`);
    return undefined;
  }
  return value;
}

/** Validates a count of tries: an integer from 1, or Infinity. */
export function checkAttempts(problems: string[], name: string, value: unknown): number | undefined {
  if (value === Infinity) return Infinity;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 1_000_000) {
    problems.push(`${name} must be an integer from 1 to 1000000, or Infinity, got ${describe(value)}`);
    return undefined;
  }
  return value;
}

/** A value as error messages show it: short, never the whole of a long string or an object. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value.length > 40 ? value.slice(0, 40) + '…' : value}'`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : typeof value;
}

/**
 * `resolve()` once per options object that cannot change (frozen, as a decorator's are, which run
 * on every call), kept in `cache`; on every call for anything else.
 */
export function resolvedOnceIfFrozen<T>(cache: WeakMap<object, T>, options: unknown, resolve: () => T): T {
  if (typeof options !== 'object' || options === null || !Object.isFrozen(options)) return resolve();
  let resolved = cache.get(options);
  if (resolved === undefined) cache.set(options, (resolved = resolve()));
  return resolved;
}
