import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package's two builds, loaded the way a consumer loads them: dist/esm (ES modules, `import`)
 * and dist/cjs (CommonJS, `require`), chosen by the `exports` map. `npm test` builds dist/ first.
 */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url)); // build/test/support -> repo root
export const ESM_ENTRY = join(ROOT, 'dist', 'esm', 'index.js');
export const CJS_ENTRY = join(ROOT, 'dist', 'cjs', 'index.js');
if (!existsSync(ESM_ENTRY) || !existsSync(CJS_ENTRY))
  throw new Error(`dist/esm or dist/cjs is missing: run \`npm run build\` (npm test does) before ${fileURLToPath(import.meta.url)}`);

export type Lib = typeof import('../../lib/index.js');
const require = createRequire(import.meta.url);
// The repo is the package itself, so its own name resolves through its `exports` (self-reference):
// `require` picks the CommonJS build, `import` the ES module build, exactly as in a consumer.
export const PACKAGE = 'nestjs-db-lock';
export const cjs = require(PACKAGE) as Lib;
export const esm = (await import(PACKAGE)) as Lib;
