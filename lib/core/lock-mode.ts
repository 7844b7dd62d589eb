/** `'read'` shares the key with other readers; `'write'` excludes everyone else. */
export type LockMode = 'read' | 'write';

export const LOCK_MODES: readonly LockMode[] = Object.freeze(['read', 'write']);

/** How a holder holds a key, as the admin calls report it: a lock's mode, or `'permit'` for a semaphore's permit. */
export type HolderMode = LockMode | 'permit';

/** The log rows' mode of a semaphore's permits (locks write 'read' or 'write'). */
export const PERMIT_MODE = 'permit' satisfies HolderMode;
