#!/usr/bin/env node
// Builds the published package: dist/esm (ES modules, `import`) and dist/cjs (CommonJS, `require`),
// each with its own .d.ts. Plain tsc twice (tsconfig.build.json, tsconfig.build.cjs.json); each
// folder gets a package.json naming its module format, so Node and TypeScript read dist/cjs/*.js
// and *.d.ts as CommonJS although the root package.json says "type": "module".
// Source maps carry their sources inline (inlineSources), so the package holds what they point to.
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
rmSync('dist', { recursive: true, force: true }); // no stale files from an older layout get packed

for (const [config, dir, type] of [
  ['tsconfig.build.json', 'dist/esm', 'module'],
  ['tsconfig.build.cjs.json', 'dist/cjs', 'commonjs'],
]) {
  console.log(`build: tsc -p ${config} -> ${dir} (${type})`);
  const result = spawnSync(process.execPath, [tsc, '-p', config], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
  writeFileSync(`${dir}/package.json`, JSON.stringify({ type }, null, 2) + '\n');
}
