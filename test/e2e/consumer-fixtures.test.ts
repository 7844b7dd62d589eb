import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createWriteStream, readdirSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The consumer fixtures (test/fixtures/*) through scripts/run-fixtures.mjs: the packed tarball
 * installed in a NestJS 11 CommonJS app tested with Jest, a NestJS 12 ES module app, and tsc
 * with every `module` setting. One test per fixture. The runner's full output goes to
 * build/fixtures.log; a failing fixture's output is in the failure message. The runner runs at
 * the lowest CPU priority, so the timing-sensitive tests running beside it keep their CPU.
 * DB_LOCK_SKIP_FIXTURES=1 skips them (e.g. offline with a cold cache).
 */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url)); // build/test/e2e -> repo root
const LOG = join(ROOT, 'build', 'fixtures.log');
const fixtures = readdirSync(join(ROOT, 'test', 'fixtures'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort();
const skip = process.env.DB_LOCK_SKIP_FIXTURES === '1' ? 'DB_LOCK_SKIP_FIXTURES=1' : false;

describe('consumer fixtures: the packed package in real apps (scripts/run-fixtures.mjs)', { skip }, () => {
  let output = '';
  let exitCode: number | null = null;

  before(
    async () => {
      await mkdir(join(ROOT, 'build'), { recursive: true });
      const log = createWriteStream(LOG);
      const child = spawn(process.execPath, [join(ROOT, 'scripts', 'run-fixtures.mjs'), '--nice'], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      for (const stream of [child.stdout, child.stderr]) {
        stream.setEncoding('utf8');
        stream.on('data', (chunk: string) => {
          output += chunk;
          log.write(chunk);
        });
      }
      exitCode = await new Promise<number | null>((resolve) => child.on('close', resolve));
      await new Promise((resolve) => log.end(resolve));
    },
    { timeout: 30 * 60_000 },
  );

  for (const name of fixtures) {
    it(name, (t) => {
      const verdict = output.split('\n').find((line) => line.startsWith(`[fixtures] PASS ${name} `) || line.startsWith(`[fixtures] FAIL ${name}`));
      if (verdict?.startsWith(`[fixtures] PASS`)) {
        t.diagnostic(verdict.slice('[fixtures] '.length));
        return;
      }
      const own = output.split('\n').filter((line) => line.startsWith(`[${name}]`) || line.startsWith('[fixtures]') || line.startsWith('[pack]'));
      assert.fail(
        `${verdict ?? `no result for ${name} (runner exit code ${exitCode})`}\n` +
          `full output: ${LOG}\n--- last lines ---\n${own.slice(-150).join('\n')}`,
      );
    });
  }
});
