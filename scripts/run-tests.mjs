#!/usr/bin/env node
// Runs every compiled *.test.js under build/test (benchmarks excluded) with node's test runner.
// Explicit file list: Node 20's `--test <dir>` would also run helper modules as tests.
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
// The runner's TAP goes through unchanged; its totals are repeated as one plain closing line,
// `N passed, N failed`, which CI (and .ci/run, adding the cluster suite) reads.
const child = spawn(process.execPath, ['--test', '--test-concurrency=2', '--test-timeout=300000', ...files], {
  stdio: ['inherit', 'pipe', 'inherit'],
});
const totals = { pass: 0, fail: 0 };
createInterface({ input: child.stdout }).on('line', (line) => {
  process.stdout.write(`${line}\n`);
  const total = /^# (pass|fail) (\d+)$/.exec(line);
  if (total) totals[total[1]] = Number(total[2]);
});
child.on('close', (code, signal) => {
  const failed = code === 0 ? totals.fail : Math.max(totals.fail, 1);
  console.log(`${totals.pass} passed, ${failed} failed`);
  process.exit(code ?? (signal ? 1 : 0));
});
