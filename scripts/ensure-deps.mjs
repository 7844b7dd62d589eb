#!/usr/bin/env node
// Lets `npm test` and `npm run sample` work straight from a fresh clone: installs the locked
// dependencies once if node_modules is missing (CI runs `npm ci` itself before this).
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

if (!existsSync('node_modules/typeorm') || !existsSync('node_modules/typescript')) {
  console.log('node_modules missing: running npm ci once');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
