/**
 * The library, as your app imports it: `import { LockService, WriteLock } from 'nestjs-db-lock'`.
 * The sample lives in the library's repository and runs against its source, so that import is
 * this one file. Only the package's public entry point is re-exported.
 */
export * from '../lib/index.js';
