/**
 * What happens to a write that escapes a fenced transaction (see `DbLockModuleOptions.escapedWrites`):
 * 'warn' (default) logs once per call site and cuts a self-deadlock short; 'error' refuses the
 * write before it is sent; 'ignore' checks nothing.
 */
export type EscapedWritesMode = 'warn' | 'error' | 'ignore';
export const ESCAPED_WRITES_MODES: readonly EscapedWritesMode[] = Object.freeze(['warn', 'error', 'ignore']);
