#!/usr/bin/env node
// Runs the consumer fixtures (test/fixtures/*): real apps that install the PACKED package (the
// tarball `npm pack` makes from dist/, as a user would get it from the registry) and lock against
// the database. Usage:
//
//   node scripts/run-fixtures.mjs [--nice] [fixture...]   (after `npm run build`; default: every fixture)
//
// --nice runs it all at the lowest CPU priority (npm test does, beside the other tests).
// For each fixture: its locked dependencies are installed once into a cache folder keyed by the
// hash of its package.json and package-lock.json (DB_LOCK_FIXTURES_CACHE, default
// ~/.cache/nestjs-db-lock-fixtures), its files are copied there, the fresh tarball is installed
// over the cached dependencies, and its `npm test` runs. The database server is DB_LOCK_TEST_URL
// (mysql://user:pass@host:port) or root@127.0.0.1:3306; each fixture creates and drops its own
// database. Prints one line per fixture and, last, `fixtures: N passed, N failed`.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, setPriority, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FIXTURES = join(ROOT, 'test', 'fixtures');
const CACHE = resolve(process.env.DB_LOCK_FIXTURES_CACHE ?? join(homedir(), '.cache', 'nestjs-db-lock-fixtures'));
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const INSTALLED = '.fixture-deps-installed'; // marker: the cached dependencies are complete
const TEST_TIMEOUT_MS = 10 * 60_000;

const log = (line) => console.log(`[fixtures] ${line}`);
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

/**
 * Runs a command, streaming its output prefixed with `[name]` (stdout too unless `echoStdout` is
 * false). Resolves with its exit code and its stdout.
 */
function run(name, command, args, { timeoutMs, echoStdout = true, ...options } = {}) {
  return new Promise((done) => {
    log(`${name}: $ ${[command, ...args].join(' ')}`);
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = timeoutMs
      ? setTimeout(() => {
          log(`${name}: timed out after ${seconds(timeoutMs)}, killing it`);
          child.kill('SIGKILL');
        }, timeoutMs)
      : undefined;
    let stdout = '';
    for (const [stream, echo] of [
      [child.stdout, echoStdout],
      [child.stderr, true],
    ]) {
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        if (stream === child.stdout) stdout += chunk;
        if (!echo) return;
        const lines = (partial + chunk).split('\n');
        partial = lines.pop();
        for (const line of lines) console.log(`[${name}] ${line}`);
      });
      stream.on('end', () => echo && partial && console.log(`[${name}] ${partial}`));
    }
    child.on('error', (error) => {
      clearTimeout(timer);
      console.log(`[${name}] ${error.message}`);
      done({ code: 1, stdout });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code: code ?? 1, stdout });
    });
  });
}

/** One process at a time per cache folder (other checkouts on this machine share the cache). */
async function withFolderLock(folder, fn) {
  const lock = `${folder}.lock`;
  for (let waitedMs = 0; ; waitedMs += 1000) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      const owner = Number(readFileSync(join(lock, 'pid'), { encoding: 'utf8', flag: 'a+' }) || 0);
      if (owner && !alive(owner)) {
        log(`removing the stale lock ${lock} of process ${owner}`);
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (waitedMs % 30_000 === 0) log(`waiting for ${lock} (held by process ${owner || '?'})`);
      if (waitedMs > TEST_TIMEOUT_MS * 2) throw new Error(`${lock} is still held after ${seconds(waitedMs)}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

async function pack() {
  if (!existsSync(join(ROOT, 'dist', 'cjs', 'index.js')) || !existsSync(join(ROOT, 'dist', 'esm', 'index.js'))) {
    console.error('[fixtures] dist/ is not built: run `npm run build` first (npm test and npm run test:fixtures do)');
    process.exit(1);
  }
  const destination = mkdtempSync(join(tmpdir(), 'nestjs-db-lock-pack-'));
  // --ignore-scripts: dist/ is already built; the prepack script would build it again.
  const { code, stdout } = await run('pack', NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', destination], {
    cwd: ROOT,
    echoStdout: false, // the JSON file list; summarised below
  });
  if (code !== 0) process.exit(1);
  const [info] = JSON.parse(stdout);
  const tarball = join(destination, info.filename);
  log(`packed ${info.filename}: ${info.entryCount} files, ${(info.size / 1024).toFixed(0)} kB (unpacked ${(info.unpackedSize / 1024).toFixed(0)} kB)`);
  return { tarball, destination };
}

/** Installs the fixture's locked dependencies (cached) and the tarball. Returns its work folder. */
async function install(name, tarball) {
  const source = join(FIXTURES, name);
  const hash = createHash('sha256');
  for (const file of ['package.json', 'package-lock.json']) hash.update(readFileSync(join(source, file)));
  const work = join(CACHE, `${name}-${hash.digest('hex').slice(0, 16)}`);
  const marker = join(work, 'node_modules', INSTALLED);

  if (existsSync(marker)) {
    log(`${name}: dependencies cached in ${work}`);
  } else {
    log(`${name}: no cached dependencies for this lockfile: installing them into ${work}`);
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    for (const file of ['package.json', 'package-lock.json']) cpSync(join(source, file), join(work, file));
    // `npm install` with the committed lockfile installs exactly the locked versions. Not `npm ci`:
    // it refuses a lockfile that lacks optional platform packages a registry mirror may not carry
    // (e.g. unrs-resolver's bindings for other systems). --ignore-scripts: no dependency here needs
    // an install script, and none gets to run one.
    const { code } = await run(name, NPM, ['install', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: work });
    if (code !== 0) throw new Error('npm install of the dependencies failed');
    writeFileSync(marker, new Date().toISOString() + '\n');
  }

  // The fixture's own files, fresh (everything but the cached node_modules).
  for (const entry of readdirSync(work)) if (entry !== 'node_modules') rmSync(join(work, entry), { recursive: true, force: true });
  cpSync(source, work, { recursive: true, filter: (path) => !/[\\/](node_modules|dist)([\\/]|$)/.test(path.slice(source.length)) });

  // The package under test: the tarball, over the cached dependencies. --no-save keeps the
  // fixture's package.json and lockfile as committed; --prefer-offline: everything else is there.
  rmSync(join(work, 'node_modules', 'nestjs-db-lock'), { recursive: true, force: true });
  const { code } = await run(name, NPM, ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-save', '--prefer-offline', tarball], {
    cwd: work,
  });
  if (code !== 0) throw new Error(`npm install ${tarball} failed`);
  const installed = join(work, 'node_modules', 'nestjs-db-lock');
  if (!existsSync(join(installed, 'dist', 'cjs', 'index.js')) || !existsSync(join(installed, 'dist', 'esm', 'index.js')))
    throw new Error(`${installed} is not the packed package (dist/cjs or dist/esm missing)`);
  return work;
}

async function main() {
  const all = readdirSync(FIXTURES, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(FIXTURES, entry.name, 'package.json')))
    .map((entry) => entry.name)
    .sort();
  const args = process.argv.slice(2);
  if (args.includes('--nice')) {
    try {
      setPriority(19); // inherited by every process started from here
    } catch (error) {
      log(`--nice: could not lower the priority (${error.message}); running at normal priority`);
    }
  }
  const wanted = args.filter((arg) => arg !== '--nice');
  const unknown = wanted.filter((name) => !all.includes(name));
  if (unknown.length) {
    console.error(`[fixtures] unknown fixture(s): ${unknown.join(', ')} (have: ${all.join(', ')})`);
    process.exit(1);
  }
  const names = wanted.length ? wanted : all;
  log(`node ${process.version}; cache ${CACHE}; database ${redact(process.env.DB_LOCK_TEST_URL ?? 'mysql://root@127.0.0.1:3306')}`);
  log(`fixtures: ${names.join(', ')}`);
  mkdirSync(CACHE, { recursive: true });

  const started = performance.now();
  const { tarball, destination } = await pack();
  const results = [];
  try {
    for (const name of names) {
      const t0 = performance.now();
      let line;
      try {
        const { installMs, testCode } = await withFolderLock(join(CACHE, name), async () => {
          const work = await install(name, tarball);
          const installMs = performance.now() - t0;
          const { code } = await run(name, NPM, ['test'], { cwd: work, timeoutMs: TEST_TIMEOUT_MS });
          return { installMs, testCode: code };
        });
        const total = performance.now() - t0;
        const timing = `${seconds(total)}: install ${seconds(installMs)}, test ${seconds(total - installMs)}`;
        line = testCode === 0 ? `PASS ${name} (${timing})` : `FAIL ${name}: npm test exited with ${testCode} (${timing})`;
        results.push(testCode === 0);
      } catch (error) {
        line = `FAIL ${name}: ${error.message} (${seconds(performance.now() - t0)})`;
        results.push(false);
      }
      log(line);
    }
  } finally {
    rmSync(destination, { recursive: true, force: true });
  }
  const passed = results.filter(Boolean).length;
  log(`done in ${seconds(performance.now() - started)}`);
  console.log(`fixtures: ${passed} passed, ${results.length - passed} failed`);
  process.exit(passed === results.length ? 0 : 1);
}

function redact(url) {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.href;
  } catch {
    return '(unparsable DB_LOCK_TEST_URL)';
  }
}

await main();
