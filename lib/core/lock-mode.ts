/** `'read'` shares the key with other readers; `'write'` excludes everyone else. */
export type LockMode = 'read' | 'write';

export const LOCK_MODES: readonly LockMode[] = Object.freeze(['read', 'write']);
