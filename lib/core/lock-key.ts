import { InvalidLockKeyError } from '../errors/invalid-lock-key.error.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { LOCK_MODES, type LockMode } from './lock-mode.js';
import { describe } from './option-checks.js';

/** Longest key, in characters (Unicode code points), namespace and ':' included. */
export const MAX_KEY_LENGTH = 191;
/** Most keys one multi-key acquisition may take. */
export const MAX_KEYS_PER_LOCK = 100;

/** One key of a multi-key request with its own mode (mixed-mode locks). */
export interface LockKeySpec {
  /** The key (1–191 characters with the namespace). */
  key: string;
  /** Its mode; default: the call's mode. */
  mode?: LockMode;
}

/**
 * What `acquire()` and friends accept as keys: a key, keys, or `{ key, mode }`s (keys given as
 * plain strings in a mixed array take the call's `mode`, as resolveTargets always did).
 */
export type LockKeys = string | readonly string[] | readonly LockKeySpec[] | readonly (string | LockKeySpec)[];

/** A validated key: what the caller wrote, what is stored, and in which mode. */
export interface LockTarget {
  /** The key as the caller gave it (no namespace). */
  readonly key: string;
  /** The namespaced key, exactly as stored (binary column: no collation folds or pads it). */
  readonly storedKey: string;
  readonly bytes: Buffer;
  readonly mode: LockMode;
  /** Set for a semaphore's permit: at most this many holders of the key at once. */
  readonly semaphoreLimit?: number;
}

/**
 * Validates keys and puts them in the one global order every process uses (by stored bytes),
 * so multi-key locks never deadlock. Duplicates merge; a key asked for in both modes is taken
 * in write mode. Throws InvalidLockKeyError before any SQL can run.
 */
export function resolveTargets(keys: unknown, defaultMode: LockMode, namespace: string): readonly LockTarget[] {
  // Anything but a single key in a valid mode takes the full path (which also reports what is wrong).
  if (typeof keys !== 'string' || (defaultMode !== 'read' && defaultMode !== 'write')) return resolveAll(keys, defaultMode, namespace);
  // A key locked again and again (a hot key, a decorator's fixed key) is checked and encoded once.
  // Keyed by namespace and mode apart, never by a joined string: keys and namespaces may hold any character.
  let perNamespace = singleKeyTargets.get(namespace);
  if (perNamespace === undefined) singleKeyTargets.set(namespace, (perNamespace = { read: new Map(), write: new Map() }));
  const byKey = perNamespace[defaultMode];
  let targets = byKey.get(keys);
  if (targets === undefined) {
    targets = Object.freeze(resolveAll(keys, defaultMode, namespace));
    if (byKey.size >= MAX_CACHED_KEYS) byKey.clear();
    byKey.set(keys, targets);
  }
  return targets;
}

/** Resolved targets of single string keys, per namespace and mode (targets are frozen, so they can be shared); a full map is cleared whole. */
const singleKeyTargets = new Map<string, Record<LockMode, Map<string, readonly LockTarget[]>>>();
const MAX_CACHED_KEYS = 1024;

function resolveAll(keys: unknown, defaultMode: LockMode, namespace: string): LockTarget[] {
  const specs: { key: unknown; mode: unknown }[] = [];
  if (typeof keys === 'string') specs.push({ key: keys, mode: defaultMode });
  else if (Array.isArray(keys)) {
    if (keys.length === 0) throw new InvalidLockKeyError(keys, 'at least one key is required');
    if (keys.length > MAX_KEYS_PER_LOCK)
      throw new InvalidLockKeyError(keys, `at most ${MAX_KEYS_PER_LOCK} keys can be locked together, got ${keys.length}`);
    for (const item of keys as unknown[]) {
      if (typeof item === 'object' && item !== null && !Array.isArray(item) && 'key' in item) {
        const spec = item as { key: unknown; mode?: unknown };
        specs.push({ key: spec.key, mode: spec.mode ?? defaultMode });
      } else specs.push({ key: item, mode: defaultMode });
    }
  } else throw new InvalidLockKeyError(keys, 'expected a string, an array of strings or an array of { key, mode }');

  const byStored = new Map<string, LockTarget>();
  for (const spec of specs) {
    const key = checkKey(spec.key, namespace);
    const mode = checkMode(spec.mode);
    const storedKey = namespace ? `${namespace}:${key}` : key;
    const previous = byStored.get(storedKey);
    if (previous && (previous.mode === 'write' || mode === 'read')) continue;
    byStored.set(storedKey, Object.freeze({ key, storedKey, bytes: Buffer.from(storedKey, 'utf8'), mode }));
  }
  return [...byStored.values()].sort((a, b) => Buffer.compare(a.bytes, b.bytes));
}

function checkKey(key: unknown, namespace: string): string {
  if (typeof key !== 'string') throw new InvalidLockKeyError(key, `a key must be a string, got ${describe(key)}`);
  if (key.length === 0) throw new InvalidLockKeyError(key, 'a key must not be empty');
  // A lone surrogate would be stored as U+FFFD, merging distinct keys into one lock.
  if (!key.isWellFormed()) throw new InvalidLockKeyError(key, 'a key must be well-formed Unicode (no lone surrogates)');
  const length = codePoints(key) + (namespace ? codePoints(namespace) + 1 : 0);
  if (length > MAX_KEY_LENGTH)
    throw new InvalidLockKeyError(
      key,
      `a key must be at most ${MAX_KEY_LENGTH} characters including the namespace, got ${length}; it is never truncated`,
    );
  return key;
}

function checkMode(mode: unknown): LockMode {
  if (!LOCK_MODES.includes(mode as LockMode)) throw new DbLockOptionsError([`mode must be 'read' or 'write', got ${describe(mode)}`], 'lock options');
  return mode as LockMode;
}

/** The length of `text` in characters (code points), as the README counts keys, namespaces and names; `length` counts UTF-16 units. */
export function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}
