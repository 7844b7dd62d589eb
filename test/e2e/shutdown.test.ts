import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { DbLockError } from '../../lib/index.js';

const scenarios = new URL('../contract/scenarios/liveness.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('shutdown', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('app.close(): refuses new locks, waits for running holders, releases the rest: another process gets the keys at once', async () => {
    const worker = await LockWorker.start({ settings: db.settings, options: { janitor: false } });
    const { app, locks } = await createLockApp(db.settings, { leaseMs: 20_000, shutdownTimeoutMs: 5000 });
    try {
      let holderAborted: boolean | undefined;
      let duringDrain: { newKey: unknown; reentrant: boolean } | undefined;
      let holderStarted!: () => void;
      const started = new Promise<void>((r) => (holderStarted = r));
      const holder = locks.withLock('busy', async (lock) => {
        holderStarted();
        await sleep(700);
        // By now shutdown is draining: a new key is refused, a key the chain holds is still free.
        const newKey = await locks.acquire('other', { timeoutMs: 0 }).then(
          () => 'granted',
          (e: unknown) => e,
        );
        const nested = await locks.acquire('busy');
        await nested.release();
        duringDrain = { newKey, reentrant: nested.reentrant };
        holderAborted = lock.signal.aborted;
        return 'done';
      });
      await started;
      const plain = await locks.acquire('held');
      const localWaiter = locks.acquire('busy', { timeoutMs: 10_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      // The other process waits for both keys. Its timeout (15 s) is shorter than the lease
      // (20 s): it can only succeed if the keys are released at shutdown, not left to expire.
      const outcome = (p: Promise<{ token: number }>): Promise<{ token: number } | Error> => p.catch((e: Error) => e);
      const takeHeld = outcome(worker.run<{ token: number }>(scenarios, 'takeOnce', { key: 'held', timeoutMs: 15_000 }));
      const takeBusy = outcome(worker.run<{ token: number }>(scenarios, 'takeOnce', { key: 'busy', timeoutMs: 15_000 }));

      const closing = app.close();
      // Asked while Nest runs the shutdown hooks: refused either way (before or after ours began).
      await assert.rejects(locks.acquire('new', { timeoutMs: 0 }), (e: unknown) => e instanceof DbLockError && /shut/.test((e as Error).message));
      const waiterError = await localWaiter;
      assert.ok(waiterError instanceof DbLockError && /shut down/.test(waiterError.message), `the local waiter was rejected: ${String(waiterError)}`);
      await closing;
      assert.equal(await holder, 'done', 'the running holder finished its work');
      assert.equal(holderAborted, false, 'it was not cut short');
      assert.ok(duringDrain!.newKey instanceof DbLockError && /shutting down/.test(duringDrain!.newKey.message), String(duringDrain!.newKey));
      assert.equal(duringDrain!.reentrant, true);
      assert.equal(plain.released, true);
      assert.equal(plain.signal.aborted, true, 'a plain handle still held at shutdown is told it lost the lock');

      for (const taken of [await takeHeld, await takeBusy]) {
        assert.ok(!(taken instanceof Error), String(taken));
        assert.equal(taken.token, 2);
      }
      for (const key of ['held', 'busy']) {
        assert.deepEqual((await db.logRows(key)).map((r) => r.status), ['RELEASED', 'RELEASED'], `${key}: released at shutdown, never expired`);
      }
    } finally {
      await app.close();
      await worker.close();
    }
  });

  it('a holder still running after shutdownTimeoutMs gets its signal aborted and its lock released', async () => {
    const { app, locks } = await createLockApp(db.settings, { leaseMs: 20_000, shutdownTimeoutMs: 300 });
    let reason: unknown;
    let holding!: () => void;
    const started = new Promise<void>((r) => (holding = r));
    const holder = locks.withLock('stuck', async (lock) => {
      holding();
      const deadline = performance.now() + 15_000;
      while (!lock.signal.aborted && performance.now() < deadline) await sleep(10);
      reason = lock.signal.reason;
    });
    // Its release after the abort fails (the shutdown already ended its rows): handled from the start,
    // as it may settle before app.close() returns.
    const holderSettled = holder.catch(() => undefined);
    await started;
    const t0 = performance.now();
    await app.close();
    const closeMs = performance.now() - t0;
    await holderSettled;
    // 300 ms of waiting plus one release round trip; 3 s of slack for a loaded machine.
    assert.ok(closeMs < 300 + 3000, `close returned after the shutdown timeout (${Math.round(closeMs)} ms)`);
    assert.ok(closeMs >= 290, `close waited for the holder first (${Math.round(closeMs)} ms)`);
    assert.equal((reason as Error | undefined)?.name, 'LockLostError');
    assert.match(String((reason as Error).message), /shut down/);
    assert.deepEqual((await db.logRows('stuck')).map((r) => r.status), ['RELEASED']);
  });

  it('after app.close() no handle of the library is left open and the process exits by itself', async () => {
    const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/handles-child.js', import.meta.url)), db.name], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await exited;
    clearTimeout(timer);
    assert.equal(code, 0, `the child exited by itself (a handle left open would keep it alive):\n${out}`);
    const line = out.split('\n').find((l) => l.startsWith('RESULT:'));
    assert.ok(line, out);
    const result = JSON.parse(line.slice('RESULT:'.length)) as {
      before: string[];
      immediately: string[];
      after: string[];
      settledMs: number;
      waiterOutcome: string;
      renewals: number;
      heldReleased: boolean;
    };
    console.log(`# open resources right after close: ${JSON.stringify(result.immediately)}; settled after ${result.settledMs} ms: ${JSON.stringify(result.after)}`);
    assert.ok(result.renewals > 0, 'the watchdog had been running');
    assert.equal(result.waiterOutcome, 'DbLockError', 'the waiter was rejected at shutdown');
    assert.equal(result.heldReleased, true);
    const remaining = [...result.after];
    for (const resource of result.before) {
      const i = remaining.indexOf(resource);
      if (i >= 0) remaining.splice(i, 1);
    }
    assert.deepEqual(remaining, [], `resources left after close: before ${JSON.stringify(result.before)}, after ${JSON.stringify(result.after)}`);
  });
});
