import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { TestDatabase } from '../support/test-database.js';

// README (options table): onEvent's "exceptions are logged, never rethrown". A listener written as
// an async function (the natural way to send an event to an async sink) whose promise rejects must
// not take the app down either. Run in a child process with Node's default unhandled-rejection mode.
let db: TestDatabase;
before(async () => {
  db = await TestDatabase.create();
});
after(async () => {
  await db?.drop();
});

it('an async onEvent listener that rejects is logged, not a process crash', () => {
  const lockApp = resolve('build/test/support/lock-app.js');
  const dir = mkdtempSync(join(tmpdir(), 'dblock-on-event-'));
  const script = join(dir, 'child.mjs');
  writeFileSync(
    script,
    `
import { createLockApp } from ${JSON.stringify(lockApp)};
const settings = ${JSON.stringify(db.settings)};
const { app, locks } = await createLockApp(settings, {
  janitor: false,
  onEvent: async (event) => { throw new Error('sink down on ' + event.type); },
});
for (let i = 0; i < 3; i++) await locks.withLock('on-event-async-' + i, async () => 1);
await new Promise((r) => setTimeout(r, 300));
const s = locks.stats();
await app.close();
console.log('SURVIVED acquired=' + s.acquired + ' released=' + s.released);
`,
  );
  const run = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 30_000 });
  rmSync(dir, { recursive: true, force: true });
  assert.equal(run.status, 0, `child exited with ${run.status}; stderr tail:\n${run.stderr.split('\n').slice(-15).join('\n')}`);
  assert.match(run.stdout, /SURVIVED acquired=3 released=3/);
  assert.match(run.stdout + run.stderr, /onEvent listener threw on 'acquired': Error: sink down on acquired/, 'the rejection is logged');
});
