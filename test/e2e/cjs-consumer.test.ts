import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/**
 * The package is ESM; many Nest apps are CommonJS. Node >= 20.19 can require() an ES module
 * graph without top-level await, so a CommonJS app can load the built package. This test runs a
 * real .cjs file in a fresh node process against dist/ (built by `npm test` before the tests).
 */
const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url)); // build/test/e2e -> repo root
const DIST_ENTRY = join(ROOT, 'dist', 'index.js');

const CHECK = (specifier: string): string => `'use strict';
const lib = require(${JSON.stringify(specifier)});
const names = ['DbLockModule', 'LockService', 'LockTimeoutError', 'LockLostError', 'DbLockError', 'InvalidLockKeyError', 'DbLockOptionsError', 'DB_LOCK_ENTITIES', 'DB_LOCK_MIGRATIONS'];
const missing = names.filter((name) => lib[name] === undefined);
const error = new lib.LockTimeoutError(['k'], 'write', 12, 10);
process.stdout.write(JSON.stringify({
  missing,
  module: typeof lib.DbLockModule.forRoot,
  forRootAsync: typeof lib.DbLockModule.forRootAsync,
  service: typeof lib.LockService,
  errorName: error.name,
  isBase: error instanceof lib.DbLockError && error instanceof Error,
  keys: error.keys,
  entities: lib.DB_LOCK_ENTITIES.length,
  isCjs: typeof module === 'object' && typeof require === 'function',
}));
`;

describe('a CommonJS app can load the built package', () => {
  let dir: string;
  before(async () => {
    assert.ok(existsSync(DIST_ENTRY), `${DIST_ENTRY} is missing: run \`npm run build\` (npm test does) before this test`);
    dir = await mkdtemp(join(tmpdir(), 'db-lock-cjs-'));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function runCjs(specifier: string): Promise<Record<string, unknown>> {
    const file = join(dir, `consumer-${Math.random().toString(36).slice(2)}.cjs`);
    await writeFile(file, CHECK(specifier));
    const { stdout } = await run(process.execPath, [file], { cwd: dir, timeout: 60_000 });
    return JSON.parse(stdout) as Record<string, unknown>;
  }

  const expected = {
    missing: [],
    module: 'function',
    forRootAsync: 'function',
    service: 'function',
    errorName: 'LockTimeoutError',
    isBase: true,
    keys: ['k'],
    entities: 4,
    isCjs: true,
  };

  it('require() of the absolute path of dist/index.js', async () => {
    assert.deepEqual(await runCjs(DIST_ENTRY), expected);
  });

  it("require('nestjs-db-lock') through package.json exports", async () => {
    await mkdir(join(dir, 'node_modules'), { recursive: true });
    await symlink(ROOT, join(dir, 'node_modules', 'nestjs-db-lock'), 'dir');
    assert.deepEqual(await runCjs('nestjs-db-lock'), expected);
  });
});
