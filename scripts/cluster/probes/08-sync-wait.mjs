// Probe 8: read-your-writes across nodes. Write on node 1 (autocommit), then at once read the row on
// node 2, with wsrep_sync_wait = 0 and = 1. Counts stale reads and times the read.
//   node scripts/cluster/probes/08-sync-wait.mjs [rounds=1000]
import { connect, percentile } from './common.mjs';

const ROUNDS = Number(process.argv[2] ?? 1000);
const w = await connect(1);
await w.query('DROP TABLE IF EXISTS p8');
await w.query('CREATE TABLE p8 (k INT PRIMARY KEY, v INT NOT NULL)');
await w.query('INSERT INTO p8 VALUES (1, 0)');
const r = await connect(2);
const out = {};
let value = 0;
for (const syncWait of [0, 1, 0, 1]) {
  await r.query('SET SESSION wsrep_sync_wait = ?', [syncWait]);
  const key = `wsrep_sync_wait=${syncWait}`;
  const o = (out[key] ??= { rounds: 0, stale: 0, readMs: [], idleReadMs: [] });
  for (let i = 0; i < ROUNDS / 2; i++) {
    value++;
    await w.query('UPDATE p8 SET v = ? WHERE k = 1', [value]);
    let t = performance.now();
    const [[row]] = await r.query('SELECT v FROM p8 WHERE k = 1');
    o.readMs.push(performance.now() - t);
    o.rounds++;
    if (row.v !== value) o.stale++;
    // the same read again, with no write in between
    t = performance.now();
    await r.query('SELECT v FROM p8 WHERE k = 1');
    o.idleReadMs.push(performance.now() - t);
  }
}
const fmt = (ms) => `p50 ${percentile(ms, 50).toFixed(2)} / p99 ${percentile(ms, 99).toFixed(2)} / max ${Math.max(...ms).toFixed(2)} ms`;
for (const [k, o] of Object.entries(out)) {
  console.log(`${k}: ${o.stale}/${o.rounds} reads right after the write on node 1 were stale; read after a write: ${fmt(o.readMs)}; read with no new write: ${fmt(o.idleReadMs)}`);
}
await w.end();
await r.end();
