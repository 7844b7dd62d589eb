import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { DB_LOCK_MIGRATIONS } from '../../lib/index.js';
import { pgTestsRun } from '../support/pg-test-database.js';

const CHILD = fileURLToPath(new URL('./without-mysql2.child.js', import.meta.url));
const BLOCK_MYSQL2 = fileURLToPath(new URL('../support/block-mysql2.register.js', import.meta.url));

/**
 * A PostgreSQL app installs no mysql2: the package's index, its migrations, its module start and its
 * locks must not load it. The child process cannot resolve mysql2 at all (it checks that first: a
 * control that the block works), runs DB_LOCK_MIGRATIONS on PostgreSQL, starts DbLockModule and
 * takes a row-lock.
 */
describe('a PostgreSQL app without mysql2', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  it('loads the package, runs the migrations, starts the module and takes a lock', async () => {
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', BLOCK_MYSQL2, CHILD], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (chunk) => (out += String(chunk)));
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited with ${code}: ${out}`))));
    });
    const seen = JSON.parse(output.trim().split('\n').pop()!) as Record<string, unknown>;
    assert.equal(seen.mysql2Blocked, true);
    assert.equal(seen.migrationsRun, DB_LOCK_MIGRATIONS.length);
    assert.equal(seen.token, 1);
  });
});
