#!/usr/bin/env node
// Runs every compiled *.test.js under build/test (benchmarks excluded) with node's test runner.
// Explicit file list: Node 20's `--test <dir>` would also run helper modules as tests.
// DB_LOCK_TEST_URLS (comma-separated mysql:// URLs) runs the whole suite once per server, e.g. a
// MariaDB and a MySQL 8 from docker-compose.yml; otherwise DB_LOCK_TEST_URL or root@127.0.0.1:3306.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const root = 'build/test';
const only = process.argv.slice(2);
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== 'bench') walk(path);
    } else if (name.endsWith('.test.js') && (only.length === 0 || only.some((o) => path.includes(o)))) files.push(path);
  }
})(root);
files.sort();
// The multi-process suites (chaos, first-use storms) each open up to about 120 connections to the
// server; two of them side by side, or one beside another multi-process file, went past MariaDB's
// default max_connections (151) and a worker failed to start. They run one at a time, alone.
const alone = files.filter((f) => f.includes('/chaos/'));
const shared = files.filter((f) => !alone.includes(f));

const servers = (process.env.DB_LOCK_TEST_URLS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const totals = { pass: 0, fail: 0 };
let status = 0;
for (const server of servers.length > 0 ? servers : [undefined]) {
  if (server) console.log(`# server ${new URL(server).host}`);
  const env = server ? { ...process.env, DB_LOCK_TEST_URL: server } : process.env;
  for (const [group, concurrency] of [
    [alone, 1],
    [shared, 2],
  ]) {
    if (group.length > 0 && (await runSuite(env, group, concurrency)) !== 0) status = 1;
  }
}
// The runner's TAP goes through unchanged; its totals are repeated as one plain closing line,
// `N passed, N failed`, which CI (and .ci/run, adding the cluster suite) reads.
console.log(`${totals.pass} passed, ${totals.fail === 0 && status !== 0 ? 1 : totals.fail} failed`);
process.exit(status);

function runSuite(env, group, concurrency) {
  const child = spawn(process.execPath, ['--test', `--test-concurrency=${concurrency}`, '--test-timeout=300000', ...group], {
    stdio: ['inherit', 'pipe', 'inherit'],
    env,
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    process.stdout.write(`${line}\n`);
    const total = /^# (pass|fail) (\d+)$/.exec(line);
    if (total) totals[total[1]] += Number(total[2]);
  });
  return new Promise((resolve) => child.on('close', (code) => resolve(code ?? 1)));
}
