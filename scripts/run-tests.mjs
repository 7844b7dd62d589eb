#!/usr/bin/env node
// Runs every compiled *.test.js under build/test (benchmarks excluded) with node's test runner.
// Explicit file list: Node 20's `--test <dir>` would also run helper modules as tests.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

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
const result = spawnSync(
  process.execPath,
  ['--test', '--test-concurrency=2', '--test-timeout=300000', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
