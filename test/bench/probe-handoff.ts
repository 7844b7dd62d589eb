/**
 * Development probe: two lock services (two "processes" as far as the database is concerned) in
 * one Node process pass one key back and forth; prints the handoff latency (release start → the
 * other side holding) and per-step costs.
 */
import 'reflect-metadata';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_handoff');
  const a = await createLockApp(db.settings, { janitor: false });
  const b = await createLockApp(db.settings, { janitor: false });
  const rounds = Number(process.argv[2] ?? 200);
  const handoffs: number[] = [];
  const releases: number[] = [];
  try {
    let holder = await a.locks.acquire('k');
    let waiterSide = b;
    for (let i = 0; i < rounds; i++) {
      const waiting = waiterSide.locks.acquire('k', { timeoutMs: 10_000 });
      await new Promise((r) => setTimeout(r, 40)); // the waiter is refused once and queues on the bell
      const t0 = performance.now();
      await holder.release();
      const t1 = performance.now();
      holder = await waiting;
      const t2 = performance.now();
      releases.push(t1 - t0);
      handoffs.push(t2 - t0);
      waiterSide = waiterSide === a ? b : a;
    }
    await holder.release();
  } finally {
    await a.app.close();
    await b.app.close();
    await db.drop();
  }
  const p = (xs: number[], q: number) => [...xs].sort((x, y) => x - y)[Math.floor(q * (xs.length - 1))]!.toFixed(3);
  console.log(`handoff p50 ${p(handoffs, 0.5)} p90 ${p(handoffs, 0.9)} ms; release p50 ${p(releases, 0.5)} ms`);
}

runProbe(main);
