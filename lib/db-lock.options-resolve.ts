import { codePoints } from './core/lock-key.js';
import { MIN_LEASE_MS } from './core/lock-request.js';
import { checkAttempts, checkDuration, describe } from './core/option-checks.js';
import { DB_LOCK_DEFAULTS, type ResolvedDbLockOptions } from './db-lock.options.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { ESCAPED_WRITES_MODES, type EscapedWritesMode } from './integrations/escaped-writes.mode.js';
import { checkTransactionHostOption, type TransactionHostOption } from './integrations/transaction-host.js';
import { LOCK_STRATEGY_CHOICES, LOCK_STRATEGY_NAMES, type LockStrategyName } from './strategies/lock-strategy-name.js';
import type { LockEventListener } from './core/lock-events.js';

const MAX_NAMESPACE_LENGTH = 64;

const KNOWN_KEYS = new Set<string>(Object.keys(DB_LOCK_DEFAULTS));
const JANITOR_KEYS = Object.keys(DB_LOCK_DEFAULTS.janitor || {});

/**
 * Merges `options` over the defaults and validates the result. Throws one DbLockOptionsError
 * that lists every problem. Used by forRoot, forRootAsync and per-call options alike.
 */
export function resolveOptions(options: unknown): ResolvedDbLockOptions {
  const problems: string[] = [];
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`]);
  }
  const input = coerceConfigValues(options as Record<string, unknown>);
  for (const key of Object.keys(input)) {
    if (!KNOWN_KEYS.has(key)) problems.push(`unknown option '${key}'`);
  }
  const pick = picker(input, DB_LOCK_DEFAULTS);

  const namespace = pick('namespace');
  if (typeof namespace !== 'string') problems.push(`namespace must be a string, got ${describe(namespace)}`);
  else if (!namespace.isWellFormed() || codePoints(namespace) > MAX_NAMESPACE_LENGTH)
    problems.push(`namespace must be well-formed text of at most ${MAX_NAMESPACE_LENGTH} characters`);

  const strategy = pick('strategy');
  if (!LOCK_STRATEGY_NAMES.includes(strategy as LockStrategyName))
    problems.push(`strategy must be ${LOCK_STRATEGY_CHOICES}, got ${describe(strategy)}`);
  const leaseMs = checkDuration(problems, 'leaseMs', pick('leaseMs'), { min: MIN_LEASE_MS });
  const timeoutMs = checkDuration(problems, 'timeoutMs', pick('timeoutMs'), { min: 0, infinite: true });
  const maxAttempts = checkAttempts(problems, 'maxAttempts', pick('maxAttempts'));
  const retryMinDelayMs = checkDuration(problems, 'retryMinDelayMs', pick('retryMinDelayMs'), { min: 1 });
  const retryMaxDelayMs = checkDuration(problems, 'retryMaxDelayMs', pick('retryMaxDelayMs'), { min: 1 });
  if (retryMinDelayMs !== undefined && retryMaxDelayMs !== undefined && retryMinDelayMs > retryMaxDelayMs)
    problems.push(`retryMinDelayMs (${retryMinDelayMs}) must not exceed retryMaxDelayMs (${retryMaxDelayMs})`);
  const slowThresholdMs = checkDuration(problems, 'slowThresholdMs', pick('slowThresholdMs'), { min: 1, infinite: true });
  const renewRaw = pick('renewIntervalMs');
  const renewIntervalMs = renewRaw === undefined ? undefined : checkDuration(problems, 'renewIntervalMs', renewRaw, { min: 10 });
  if (renewIntervalMs !== undefined && leaseMs !== undefined && renewIntervalMs >= leaseMs)
    problems.push(`renewIntervalMs (${renewIntervalMs}) must be shorter than leaseMs (${leaseMs})`);
  const maxHoldMs = checkDuration(problems, 'maxHoldMs', pick('maxHoldMs'), { min: 1, infinite: true });

  const poolSize = pick('poolSize');
  if (typeof poolSize !== 'number' || !Number.isInteger(poolSize) || poolSize < 2 || poolSize > 100)
    problems.push(`poolSize must be an integer from 2 to 100, got ${describe(poolSize)}`);

  const writerPreference = pick('writerPreference');
  if (typeof writerPreference !== 'boolean') problems.push(`writerPreference must be a boolean, got ${describe(writerPreference)}`);

  const waitersRaw = pick('maxRowLockWaiters');
  const maxRowLockWaiters = waitersRaw === undefined ? undefined : checkAttempts(problems, 'maxRowLockWaiters', waitersRaw);

  const janitor = resolveJanitor(problems, input.janitor);

  const onEvent = pick('onEvent');
  if (onEvent !== undefined && typeof onEvent !== 'function') problems.push(`onEvent must be a function, got ${describe(onEvent)}`);

  const shutdownTimeoutMs = checkDuration(problems, 'shutdownTimeoutMs', pick('shutdownTimeoutMs'), { min: 0 });

  const escapedWrites = pick('escapedWrites');
  if (!ESCAPED_WRITES_MODES.includes(escapedWrites as EscapedWritesMode))
    problems.push(`escapedWrites must be 'warn', 'error' or 'ignore', got ${describe(escapedWrites)}`);
  const transactionHost = pick('transactionHost');
  checkTransactionHostOption(problems, transactionHost);

  if (problems.length > 0) throw new DbLockOptionsError(problems);
  return Object.freeze({
    namespace: namespace as string,
    strategy: strategy as LockStrategyName,
    leaseMs: leaseMs!,
    timeoutMs: timeoutMs!,
    maxAttempts: maxAttempts!,
    retryMinDelayMs: retryMinDelayMs!,
    retryMaxDelayMs: retryMaxDelayMs!,
    slowThresholdMs: slowThresholdMs!,
    renewIntervalMs,
    maxHoldMs: maxHoldMs!,
    poolSize: poolSize as number,
    writerPreference: writerPreference as boolean,
    maxRowLockWaiters,
    janitor,
    onEvent: onEvent as LockEventListener | undefined,
    shutdownTimeoutMs: shutdownTimeoutMs!,
    escapedWrites: escapedWrites as EscapedWritesMode,
    transactionHost: transactionHost as TransactionHostOption,
  });
}

function resolveJanitor(problems: string[], raw: unknown): ResolvedDbLockOptions['janitor'] {
  if (raw === false) return false;
  if (raw === undefined) return DB_LOCK_DEFAULTS.janitor;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    problems.push(`janitor must be an object or false, got ${describe(raw)}`);
    return false;
  }
  const input = raw as Record<string, unknown>;
  const defaults = DB_LOCK_DEFAULTS.janitor;
  for (const key of Object.keys(input)) {
    if (!(key in defaults)) problems.push(`unknown option 'janitor.${key}'`);
  }
  const given = picker(input, defaults);
  const intervalMs = checkDuration(problems, 'janitor.intervalMs', given('intervalMs'), { min: 100 });
  const logRetentionMs = checkDuration(problems, 'janitor.logRetentionMs', given('logRetentionMs'), {
    min: 0,
    infinite: true,
    noTimer: true,
  });
  const batchSize = given('batchSize');
  if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000)
    problems.push(`janitor.batchSize must be an integer from 1 to 100000, got ${describe(batchSize)}`);
  const idleKeyMs = checkDuration(problems, 'janitor.idleKeyMs', given('idleKeyMs'), { min: 0, infinite: true, noTimer: true });
  return Object.freeze({ intervalMs: intervalMs!, logRetentionMs: logRetentionMs!, batchSize: batchSize as number, idleKeyMs: idleKeyMs! });
}

/** Reads options by name: the given value, or the default when it is missing (only undefined: null is a value, refused where it is wrong). */
function picker<D extends object>(input: Record<string, unknown>, defaults: D): <K extends keyof D & string>(key: K) => unknown {
  return (key) => (input[key] === undefined ? defaults[key] : input[key]);
}

/**
 * Module options often come from configuration (`ConfigService.get('LOCK_LEASE_MS')` returns the
 * string '5000'). Decimal integer strings, 'Infinity' and 'true'/'false' are taken for the numbers
 * and booleans they spell, at the top level and in `janitor`; anything else is validated as given.
 * Known options are read by name, so an options object that is a class instance with getters (a
 * typed config class returned by a factory) counts as the plain object it stands for.
 */
function coerceConfigValues(input: Record<string, unknown>, known: Iterable<string> = KNOWN_KEYS): Record<string, unknown> {
  // No prototype: an own '__proto__' key (JSON.parse makes one) stays a key, refused as unknown, not a prototype whose values read as options.
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const keys = new Set(Object.keys(input));
  for (const key of known) if (key in input && !(key in Object.prototype)) keys.add(key);
  for (const key of keys) {
    const value = input[key];
    if (value === undefined) continue;
    if (key === 'janitor' && typeof value === 'object' && value !== null && !Array.isArray(value))
      out[key] = coerceConfigValues(value as Record<string, unknown>, JANITOR_KEYS);
    else if (TEXT_OPTIONS.has(key)) out[key] = value;
    else out[key] = coerceScalar(value);
  }
  return out;
}

/** Options whose values are text (or functions): never read as numbers or booleans. */
const TEXT_OPTIONS = new Set(['namespace', 'strategy', 'onEvent', 'escapedWrites']);

function coerceScalar(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const text = value.trim();
  if (/^-?\d+$/.test(text)) return Number(text);
  if (text === 'Infinity') return Infinity;
  if (text === 'true') return true;
  if (text === 'false') return false;
  return value;
}
