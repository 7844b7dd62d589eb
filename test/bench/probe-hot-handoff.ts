/**
 * Development probe: the lease hot-key handoff, statement by statement. Several lock services (as
 * many "processes" as far as the database is concerned) in this one Node process, callers
 * re-requesting one key at once; every release batch (the one that rings the bell) and every grant
 * after a bell wait is timed on the wire. Prints, per handoff, the server chain (release sent → the
 * next holder's grant answered) next to what the callers see (release called → next caller holding).
 * Also the client's share of a handoff (release called → sent; grant answered → caller holding)
 * and what else went on the wire during holds. `PROBE_SECTION=1` gives each hold a critical
 * section on a connection of the caller's own (a read and a durable write, as the bench's).
 * `node build/test/bench/probe-hot-handoff.js [services] [callers] [seconds]`
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { tapStatements } from '../support/statement-tap.js';

async function main(): Promise<void> {
  const services = Number(process.argv[2] ?? 4);
  const callers = Number(process.argv[3] ?? 4);
  const seconds = Number(process.argv[4] ?? 3);
  const db = await TestDatabase.create('dblock_hot');
  const apps = [];
  for (let i = 0; i < services; i++) apps.push(await createLockApp(db.settings, { janitor: false }));
  const events: { kind: string; label: string; sent: number; answered: number }[] = [];
  tapStatements((sql) => {
    const kind = sql.includes('RELEASE_LOCK')
      ? 'release+ring'
      : sql.includes('INTO @dbl_bell_got')
        ? 'bell+grant'
        : /db_lock_log FORCE INDEX \(PRIMARY\) SET status/.test(sql)
          ? 'release'
          : sql.includes('START TRANSACTION')
            ? 'grant'
            : 'other';
    const sent = performance.now();
    const label = kind === 'other' ? sql.replace(/\s+/g, ' ').slice(0, 40) : kind;
    return (error) => void events.push({ kind: kind + (error ? ' (error)' : ''), label, sent, answered: performance.now() });
  });
  if (process.env.PROBE_SECTION) {
    await db.query('CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)');
    await db.query('INSERT INTO counter VALUES (1, 0)');
  }
  const holds: { calledRelease: number; acquired: number }[] = [];
  let counter = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    apps.flatMap(({ locks }) =>
      Array.from({ length: callers }, async () => {
        // PROBE_SECTION=1: a critical section on a connection of the caller's own (a read and a durable write), as the bench's.
        const section = process.env.PROBE_SECTION ? await mysql.createConnection(db.settings) : undefined;
        while (performance.now() < until) {
          const lock = await locks.acquire('hot', { timeoutMs: 30_000 });
          const acquired = performance.now();
          const seen = counter;
          if (section) {
            await section.query('SELECT n FROM counter WHERE id = 1');
            await section.query('UPDATE counter SET n = n + 1 WHERE id = 1');
          } else await new Promise((r) => setImmediate(r));
          counter = seen + 1;
          const calledRelease = performance.now();
          await lock.release();
          holds.push({ calledRelease, acquired });
        }
      }),
    ),
  );
  const byKind = new Map<string, number[]>();
  for (const e of events) byKind.set(e.kind, [...(byKind.get(e.kind) ?? []), e.answered - e.sent]);
  const p = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))]!;
  console.log(`${holds.length} holds in ${seconds} s (${Math.round(holds.length / seconds)} ops/s), counter ${counter}`);
  for (const [kind, xs] of byKind)
    console.log(`${kind.padEnd(22)} n=${String(xs.length).padStart(5)} round trip p50 ${p(xs, 0.5).toFixed(3)} p90 ${p(xs, 0.9).toFixed(3)} ms`);
  // Handoffs: order holds by acquisition; for each, the previous hold's release call → this acquisition.
  const ordered = [...holds].sort((a, b) => a.acquired - b.acquired);
  const handoff: number[] = [];
  const chain: number[] = [];
  const releases = events.filter((e) => e.kind === 'release+ring' || e.kind === 'release').sort((a, b) => a.sent - b.sent);
  const grants = events.filter((e) => e.kind === 'bell+grant' || e.kind === 'grant').sort((a, b) => a.answered - b.answered);
  for (let i = 1; i < ordered.length; i++) handoff.push(ordered[i]!.acquired - ordered[i - 1]!.calledRelease);
  for (const g of grants) {
    const r = releases.filter((e) => e.sent < g.answered).at(-1);
    if (r) chain.push(g.answered - r.sent);
  }
  console.log(`handoff (release called → next holding) p50 ${p(handoff, 0.5).toFixed(3)} p90 ${p(handoff, 0.9).toFixed(3)} ms`);
  console.log(`server chain (release sent → a grant answered) p50 ${p(chain, 0.5).toFixed(3)} p90 ${p(chain, 0.9).toFixed(3)} ms`);
  // The client's share of a handoff: release called → its release sent, and the grant answered → its caller holding.
  const toSend: number[] = [];
  for (const h of ordered) {
    const r = releases.find((e) => e.sent >= h.calledRelease);
    if (r && r.sent - h.calledRelease < 5) toSend.push(r.sent - h.calledRelease);
  }
  const toHolding: number[] = [];
  for (const g of grants) {
    const h = ordered.find((x) => x.acquired >= g.answered);
    if (h && h.acquired - g.answered < 5) toHolding.push(h.acquired - g.answered);
  }
  console.log(
    `client: release called → sent p50 ${p(toSend, 0.5).toFixed(3)}; grant answered → caller holding p50 ${p(toHolding, 0.5).toFixed(3)} ms`,
  );
  // What else went on the wire while someone held the key (the critical section's own statements included).
  const during = new Map<string, number>();
  for (const h of ordered)
    for (const e of events) if (e.sent > h.acquired && e.sent < h.calledRelease) during.set(e.label, (during.get(e.label) ?? 0) + 1);
  for (const [label, n] of [...during].sort((a, b) => b[1] - a[1]).slice(0, 8))
    console.log(`  sent during holds: ${(n / ordered.length).toFixed(2)} per hold  ${label}`);
  const holdTimes = ordered.map((h) => h.calledRelease - h.acquired);
  console.log(`hold (acquired → release called) p50 ${p(holdTimes, 0.5).toFixed(3)} ms`);
  for (const { app } of apps) await app.close();
  await db.drop();
  process.exit(0);
}
void main();
