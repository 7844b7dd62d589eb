import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { compileFunction } from 'node:vm';
import { CJS_ENTRY, cjs, ESM_ENTRY, esm, PACKAGE, ROOT } from '../support/dual-builds.js';

/**
 * The package ships two builds: dist/esm (ES modules, `import`) and dist/cjs (CommonJS,
 * `require`), chosen by the `exports` map. This file checks the built package (`npm test` builds
 * dist/ first): each entry resolves to its own build, the CommonJS files really are CommonJS (so
 * Jest and TypeScript < 5.8 can load them), every .js has its .d.ts, source maps carry their
 * sources, `npm pack` ships dist/ only, and fresh processes of either format load the package and
 * its testing entry. That both builds in ONE process work together: dual-builds-one-process.test.ts.
 * The consumer fixtures (test/fixtures, scripts/run-fixtures.mjs) install the packed tarball in
 * real NestJS 11 / Jest and NestJS 12 / ESM apps.
 */
const run = promisify(execFile);
const require = createRequire(import.meta.url);

function files(dir: string, suffix: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith(suffix))
    .map((name) => join(dir, name))
    .sort();
}

describe('package layout: an ES module build and a CommonJS build', () => {
  it('`import` resolves to dist/esm, `require` to dist/cjs: two copies of the library', () => {
    assert.equal(fileURLToPath(import.meta.resolve(PACKAGE)), ESM_ENTRY);
    assert.equal(require.resolve(PACKAGE), CJS_ENTRY);
    assert.notEqual(cjs.LockService, esm.LockService);
    assert.notEqual(cjs.WriteLock, esm.WriteLock);
    assert.notEqual(cjs.LockTimeoutError, esm.LockTimeoutError);
    assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort(), 'both builds export the same names');
  });

  it('each folder states its module format; the root package.json maps each condition to its own types', () => {
    assert.deepEqual(JSON.parse(readFileSync(join(ROOT, 'dist/cjs/package.json'), 'utf8')), { type: 'commonjs' });
    assert.deepEqual(JSON.parse(readFileSync(join(ROOT, 'dist/esm/package.json'), 'utf8')), { type: 'module' });
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, any>;
    assert.deepEqual(pkg.exports['.'], {
      import: { types: './dist/esm/index.d.ts', default: './dist/esm/index.js' },
      require: { types: './dist/cjs/index.d.ts', default: './dist/cjs/index.js' },
    });
    assert.deepEqual(pkg.exports['./testing'], {
      import: { types: './dist/esm/testing/index.d.ts', default: './dist/esm/testing/index.js' },
      require: { types: './dist/cjs/testing/index.d.ts', default: './dist/cjs/testing/index.js' },
    });
    // TypeScript's node10 resolution (module: commonjs) reads no exports map: typesVersions points it at the subpath's types.
    assert.deepEqual(pkg.typesVersions, { '*': { testing: ['./dist/cjs/testing/index.d.ts'] } });
    assert.equal(pkg.peerDependenciesMeta['@opentelemetry/api'].optional, true);
    assert.equal(pkg.main, './dist/cjs/index.js');
    assert.equal(pkg.types, './dist/cjs/index.d.ts');
    assert.deepEqual(pkg.files, ['dist']);
  });

  it('every file of dist/cjs is CommonJS (no import/export statement), so loaders without require(esm) take it', () => {
    const sources = files(join(ROOT, 'dist/cjs'), '.js');
    assert.ok(sources.length > 30, `only ${sources.length} files in dist/cjs`);
    for (const file of sources) {
      // Compiling as a CommonJS module body throws a SyntaxError on `import`/`export` statements.
      assert.doesNotThrow(() => compileFunction(readFileSync(file, 'utf8'), ['exports', 'require', 'module', '__filename', '__dirname']), file);
    }
  });

  it('every .js of both builds has its .d.ts, and every source map carries its sources', () => {
    for (const build of ['esm', 'cjs']) {
      const dir = join(ROOT, 'dist', build);
      const js = files(dir, '.js');
      assert.deepEqual(
        js.filter((file) => !existsSync(file.replace(/\.js$/, '.d.ts'))),
        [],
        `${build}: .js files without .d.ts`,
      );
      assert.deepEqual(files(dir, '.d.ts.map'), [], 'no declaration maps (they would point at lib/*.ts, which is not shipped)');
      for (const file of files(dir, '.js.map')) {
        const map = JSON.parse(readFileSync(file, 'utf8')) as { sources: string[]; sourcesContent?: (string | null)[] };
        assert.equal(map.sourcesContent?.length, map.sources.length, `${file}: sourcesContent`);
        assert.ok(
          map.sourcesContent.every((text) => typeof text === 'string' && text.length > 0),
          `${file}: empty source`,
        );
      }
      assert.equal(files(dir, '.js.map').length, js.length, `${build}: one map per .js`);
    }
  });

  it('`npm pack` ships dist/ (both builds), package.json, README and LICENSE, nothing else', async () => {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const { stdout } = await run(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, timeout: 60_000 });
    const [packed] = JSON.parse(stdout) as { files: { path: string }[] }[];
    const paths = packed!.files.map((file) => file.path);
    assert.deepEqual(
      paths.filter((path) => !path.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(path)),
      [],
    );
    for (const path of [
      'dist/esm/index.js',
      'dist/esm/index.d.ts',
      'dist/cjs/index.js',
      'dist/cjs/index.d.ts',
      'dist/cjs/package.json',
      'dist/esm/package.json',
      'dist/esm/testing/index.js',
      'dist/cjs/testing/index.js',
    ])
      assert.ok(paths.includes(path), `${path} is packed`);
  });
});

describe('a CommonJS app and an ES module app load the package in a fresh node process', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'db-lock-consumer-'));
    await mkdir(join(dir, 'node_modules'), { recursive: true });
    await symlink(ROOT, join(dir, 'node_modules', PACKAGE), 'dir');
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const CHECK = `
const names = ['DbLockModule', 'LockService', 'LockTimeoutError', 'LockLostError', 'DbLockError', 'InvalidLockKeyError', 'DbLockOptionsError', 'DB_LOCK_ENTITIES', 'DB_LOCK_MIGRATIONS', 'WriteLock', 'ReadLock', 'DistributedLock', 'LockServiceRegistry'];
const error = new lib.LockTimeoutError(['k'], 'write', 12, 10);
process.stdout.write(JSON.stringify({
  entry,
  missing: names.filter((name) => lib[name] === undefined),
  module: typeof lib.DbLockModule.forRoot,
  errorName: error.name,
  isBase: error instanceof lib.DbLockError && error instanceof Error && !(error instanceof lib.LockLostError),
  entities: lib.DB_LOCK_ENTITIES.length,
}));
`;

  async function runFile(name: string, source: string): Promise<Record<string, unknown>> {
    await writeFile(join(dir, name), source);
    const { stdout } = await run(process.execPath, [join(dir, name)], { cwd: dir, timeout: 60_000 });
    return JSON.parse(stdout) as Record<string, unknown>;
  }

  const expected = { missing: [], module: 'function', errorName: 'LockTimeoutError', isBase: true, entities: 4 };

  it("require('nestjs-db-lock') from a .cjs file gets dist/cjs", async () => {
    const result = await runFile(
      'consumer.cjs',
      `'use strict';\nconst lib = require('${PACKAGE}');\nconst entry = require('node:path').relative(${JSON.stringify(ROOT)}, require.resolve('${PACKAGE}'));\n${CHECK}`,
    );
    assert.deepEqual(result, { entry: join('dist', 'cjs', 'index.js'), ...expected });
  });

  it("import from '.mjs' gets dist/esm", async () => {
    const result = await runFile(
      'consumer.mjs',
      `import * as lib from '${PACKAGE}';\nimport { relative } from 'node:path';\nimport { fileURLToPath, pathToFileURL } from 'node:url';\n` +
        `const entry = relative(${JSON.stringify(ROOT)}, fileURLToPath(import.meta.resolve('${PACKAGE}')));\n${CHECK}`,
    );
    assert.deepEqual(result, { entry: join('dist', 'esm', 'index.js'), ...expected });
  });
});

describe('nestjs-db-lock/testing in both formats, with @opentelemetry/api absent', () => {
  // Inside the package (build/), so that `nestjs-db-lock` resolves to itself and Nest resolves from its node_modules.
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(ROOT, 'build', 'testing-consumer-'));
    // Makes @opentelemetry/api unresolvable, as in an app that did not install it: require (CommonJS build) and import (ES module build).
    await writeFile(
      join(dir, 'block.cjs'),
      `const Module = require('node:module');\nconst resolve = Module._resolveFilename;\n` +
        `Module._resolveFilename = function (request, ...rest) {\n` +
        `  if (request === '@opentelemetry/api') throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), { code: 'MODULE_NOT_FOUND' });\n` +
        `  return resolve.call(this, request, ...rest);\n};\n`,
    );
    await writeFile(
      join(dir, 'hooks.mjs'),
      `export async function resolve(specifier, context, next) {\n` +
        `  if (specifier === '@opentelemetry/api') throw Object.assign(new Error('blocked'), { code: 'ERR_MODULE_NOT_FOUND' });\n` +
        `  return next(specifier, context);\n}\n`,
    );
    await writeFile(join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n`);
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  // A decorated method locked through the in-memory service: two concurrent calls on one key never overlap.
  const USE = `
let apiMissing = false;
try { await import('@opentelemetry/api'); } catch { apiMissing = true; }
let inside = 0, most = 0;
class Loans { async approve(id) { most = Math.max(most, ++inside); await new Promise((r) => setImmediate(r)); inside--; return locks.currentLock.fencingToken; } }
const descriptor = Object.getOwnPropertyDescriptor(Loans.prototype, 'approve');
lib.WriteLock('loan:{0}')(Loans.prototype, 'approve', descriptor);
Object.defineProperty(Loans.prototype, 'approve', descriptor);
class AppModule {}
Module({ imports: [testing.DbLockTestingModule.forRoot()] })(AppModule);
const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
await app.init();
const locks = app.get(lib.LockService);
const loans = new Loans();
const tokens = await Promise.all([loans.approve(7), loans.approve(7)]);
await app.close();
process.stdout.write(JSON.stringify({ entry, apiMissing, most, tokens: tokens.sort() }));
`;

  async function runChild(name: string, source: string): Promise<Record<string, unknown>> {
    await writeFile(join(dir, name), source);
    const args = ['--require', join(dir, 'block.cjs'), '--import', pathToFileURL(join(dir, 'register.mjs')).href, join(dir, name)];
    const { stdout } = await run(process.execPath, args, { cwd: dir, timeout: 60_000 });
    return JSON.parse(stdout) as Record<string, unknown>;
  }

  it("require('nestjs-db-lock/testing') gets dist/cjs/testing; the decorators lock through it with no SDK and no API", async () => {
    const result = await runChild(
      'consumer.cjs',
      `'use strict';\nrequire('reflect-metadata');\nconst lib = require('${PACKAGE}');\nconst testing = require('${PACKAGE}/testing');\n` +
        `const { Module } = require('@nestjs/common');\nconst { NestFactory } = require('@nestjs/core');\n` +
        `const entry = require('node:path').relative(${JSON.stringify(ROOT)}, require.resolve('${PACKAGE}/testing'));\n(async () => {${USE}})();`,
    );
    assert.deepEqual(result, { entry: join('dist', 'cjs', 'testing', 'index.js'), apiMissing: true, most: 1, tokens: [1, 2] });
  });

  it("import 'nestjs-db-lock/testing' gets dist/esm/testing, the same way", async () => {
    const result = await runChild(
      'consumer.mjs',
      `import 'reflect-metadata';\nimport * as lib from '${PACKAGE}';\nimport * as testing from '${PACKAGE}/testing';\n` +
        `import { Module } from '@nestjs/common';\nimport { NestFactory } from '@nestjs/core';\nimport { relative } from 'node:path';\nimport { fileURLToPath, pathToFileURL } from 'node:url';\n` +
        `const entry = relative(${JSON.stringify(ROOT)}, fileURLToPath(import.meta.resolve('${PACKAGE}/testing')));\n${USE}`,
    );
    assert.deepEqual(result, { entry: join('dist', 'esm', 'testing', 'index.js'), apiMissing: true, most: 1, tokens: [1, 2] });
  });
});
