// Probe 1: a transaction that loses a write conflict to another node, sent (a) as one multi-statement
// batch and (b) as separate round trips; (c) single autocommit UPDATEs and wsrep_retry_autocommit.
//
// Every transaction is
//   START TRANSACTION; INSERT INTO p1_a VALUES (id); UPDATE p1_hot SET v=v+1 WHERE k=1; SET @x=1;
//   INSERT INTO p1_b VALUES (id); COMMIT
// p1_a is written before the contended UPDATE, so it can only be lost with the whole transaction:
// "id in p1_a" <=> "the transaction committed". "id in p1_b but not in p1_a" means the INSERT after the
// abort ran on its own, in autocommit. Every node runs CLIENTS_PER_NODE clients on the same hot row.
//
//   node scripts/cluster/probes/01-bf-abort-batch.mjs [totalPerMode=1500] [clientsPerNode=2]
import { connect, describe, tally, wsrepCounters, diff } from './common.mjs';

const TOTAL = Number(process.argv[2] ?? 1500);
const PER_NODE = Number(process.argv[3] ?? 2);
const NODES = [1, 2, 3];
const STATEMENTS = (id) => [
  'START TRANSACTION',
  `INSERT INTO p1_a (id) VALUES (${id})`,
  'UPDATE p1_hot SET v = v + 1 WHERE k = 1',
  'SET @x = 1',
  `INSERT INTO p1_b (id) VALUES (${id})`,
  'COMMIT',
];

async function setup() {
  const c = await connect(1);
  await c.query('DROP TABLE IF EXISTS p1_hot, p1_a, p1_b');
  await c.query('CREATE TABLE p1_hot (k INT PRIMARY KEY, v INT NOT NULL)');
  await c.query('CREATE TABLE p1_a (id INT PRIMARY KEY)');
  await c.query('CREATE TABLE p1_b (id INT PRIMARY KEY)');
  await c.query('INSERT INTO p1_hot VALUES (1, 0)');
  await c.end();
}

async function counters() {
  const out = {};
  for (const n of NODES) {
    const c = await connect(n);
    out[n] = await wsrepCounters(c);
    await c.end();
  }
  return out;
}

function sumCounters(before, after) {
  const total = {};
  for (const n of NODES) for (const [k, v] of Object.entries(diff(after[n], before[n]))) total[k] = (total[k] ?? 0) + v;
  return total;
}

/** Runs TOTAL transactions over all clients; returns [{id, ok, error, failedAt}]. */
async function run(mode, firstId) {
  const clients = [];
  for (const n of NODES) for (let i = 0; i < PER_NODE; i++) clients.push({ n, conn: await connect(n, { multipleStatements: true }) });
  const perClient = Math.ceil(TOTAL / clients.length);
  const results = [];
  let next = firstId;
  await Promise.all(
    clients.map(async ({ n, conn }) => {
      if (mode === 'batch, wsrep_retry_autocommit=0') await conn.query('SET SESSION wsrep_retry_autocommit = 0');
      for (let i = 0; i < perClient; i++) {
        const id = next++;
        const stmts = STATEMENTS(id);
        const r = { id, node: n, ok: true, error: null, failedAt: null };
        if (mode.startsWith('batch')) {
          try {
            const [headers] = await conn.query(stmts.join('; '));
            // per statement: affected rows and SERVER_STATUS flags (1 = in transaction, 2 = autocommit)
            r.headers = headers.map((h) => `${h.affectedRows}/${h.serverStatus & 1 ? 'inTrx' : 'noTrx'}`).join(' ');
          } catch (err) {
            Object.assign(r, { ok: false, error: describe(err), failedAt: '(batch)' });
          }
        } else {
          for (const sql of stmts) {
            try {
              await conn.query(sql);
            } catch (err) {
              Object.assign(r, { ok: false, error: describe(err), failedAt: sql.split(' (')[0] });
              break;
            }
          }
        }
        // leave no transaction open whatever happened
        await conn.query('ROLLBACK').catch(() => {});
        results.push(r);
      }
    }),
  );
  for (const { conn } of clients) await conn.end();
  return results;
}

async function check(mode, results) {
  const c = await connect(1);
  await c.query('SET SESSION wsrep_sync_wait = 1');
  const ids = results.map((r) => r.id);
  const [a] = await c.query('SELECT id FROM p1_a WHERE id BETWEEN ? AND ?', [Math.min(...ids), Math.max(...ids)]);
  const [b] = await c.query('SELECT id FROM p1_b WHERE id BETWEEN ? AND ?', [Math.min(...ids), Math.max(...ids)]);
  const [[hot]] = await c.query('SELECT v FROM p1_hot WHERE k = 1');
  await c.end();
  const inA = new Set(a.map((r) => r.id));
  const inB = new Set(b.map((r) => r.id));
  const outcome = {};
  const errors = {};
  const examples = [];
  for (const r of results) {
    const committed = inA.has(r.id);
    const tail = inB.has(r.id) && !committed;
    const key = `${r.ok ? 'reported OK' : 'reported error'} / ${committed ? 'committed' : 'rolled back'}${tail ? ' / p1_b row committed alone (autocommit)' : ''}`;
    tally(outcome, key);
    if (!r.ok) tally(errors, `${r.failedAt}: ${r.error}`);
    if (r.ok && !committed && examples.length < 8) examples.push(`id ${r.id} on node ${r.node}: ${r.headers}`);
  }
  const result = { mode, transactions: results.length, outcome, errors, committedInA: inA.size, hotRowIncrements: hot.v };
  if (mode.startsWith('batch')) {
    const okHeaders = results.find((r) => r.ok && inA.has(r.id))?.headers;
    result.statementHeaders = { legend: 'affectedRows/in-transaction flag per statement: START, INSERT a, UPDATE, SET, INSERT b, COMMIT', committedExample: okHeaders, falseSuccessExamples: examples };
  }
  return result;
}

async function autocommitRun(retry, n) {
  // single autocommit UPDATEs of the hot row, all clients, wsrep_retry_autocommit set per session
  const clients = [];
  for (const node of NODES) for (let i = 0; i < PER_NODE; i++) clients.push(await connect(node));
  const reset = await connect(1);
  await reset.query('UPDATE p1_hot SET v = 0 WHERE k = 1');
  await reset.end();
  let ok = 0;
  const errors = {};
  await Promise.all(
    clients.map(async (c) => {
      await c.query('SET SESSION wsrep_retry_autocommit = ?', [retry]);
      for (let i = 0; i < Math.ceil(n / clients.length); i++) {
        try {
          await c.query('UPDATE p1_hot SET v = v + 1 WHERE k = 1');
          ok++;
        } catch (err) {
          tally(errors, describe(err));
        }
      }
    }),
  );
  for (const c of clients) await c.end();
  const c = await connect(1);
  await c.query('SET SESSION wsrep_sync_wait = 1');
  const [[hot]] = await c.query('SELECT v FROM p1_hot WHERE k = 1');
  await c.end();
  return { wsrep_retry_autocommit: retry, statements: Math.ceil(n / clients.length) * clients.length, ok, errors, hotRowValue: hot.v };
}

await setup();
const out = [];
for (const [i, mode] of ['batch', 'batch, wsrep_retry_autocommit=0', 'separate'].entries()) {
  const before = await counters();
  const t0 = Date.now();
  const results = await run(mode, (i + 1) * 1_000_000);
  const ms = Date.now() - t0;
  const summary = await check(mode, results);
  summary.ms = ms;
  summary.wsrepCounters = sumCounters(before, await counters());
  out.push(summary);
  // reset the hot row counter between modes so hotRowIncrements is per mode
  const c = await connect(1);
  await c.query('UPDATE p1_hot SET v = 0 WHERE k = 1');
  await c.end();
}
for (const retry of [0, 1, 4]) {
  const before = await counters();
  const r = await autocommitRun(retry, TOTAL);
  r.wsrepCounters = sumCounters(before, await counters());
  out.push(r);
}
const conn = await connect(1);
const [[vars]] = await conn.query('SELECT @@global.wsrep_retry_autocommit AS retry_default, @@tx_isolation AS isolation');
await conn.end();
console.log(JSON.stringify({ clients: NODES.length * PER_NODE, serverDefaults: vars, results: out }, null, 2));
