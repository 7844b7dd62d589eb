// Probe 5: does SET STATEMENT max_statement_time=0.2 FOR SELECT ... FOR UPDATE bound a lock wait on a
// Galera node? A holds the row lock on node 1; B asks for it REPEAT times, on node 1 then on node 2.
//   node scripts/cluster/probes/05-max-statement-time.mjs [repeat=10]
import { connect, describe, tally, percentile } from './common.mjs';

const REPEAT = Number(process.argv[2] ?? 10);
const setup = await connect(1);
await setup.query('DROP TABLE IF EXISTS p5');
await setup.query('CREATE TABLE p5 (k INT PRIMARY KEY, v INT NOT NULL)');
await setup.query('INSERT INTO p5 VALUES (1, 0)');
await setup.end();

const holder = await connect(1);
await holder.query('START TRANSACTION');
await holder.query('SELECT v FROM p5 WHERE k = 1 FOR UPDATE');
const out = {};
for (const [label, node, sql] of [
  ['node 1, SET STATEMENT max_statement_time=0.2', 1, 'SET STATEMENT max_statement_time=0.2 FOR SELECT v FROM p5 WHERE k = 1 FOR UPDATE'],
  ['node 1, SET STATEMENT innodb_lock_wait_timeout=1', 1, 'SET STATEMENT innodb_lock_wait_timeout=1 FOR SELECT v FROM p5 WHERE k = 1 FOR UPDATE'],
  ['node 2 (lock held on node 1), SET STATEMENT max_statement_time=0.2', 2, 'SET STATEMENT max_statement_time=0.2 FOR SELECT v FROM p5 WHERE k = 1 FOR UPDATE'],
]) {
  const conn = await connect(node);
  const results = {};
  const ms = [];
  for (let i = 0; i < REPEAT; i++) {
    await conn.query('START TRANSACTION');
    const t = performance.now();
    try {
      await conn.query(sql);
      tally(results, 'OK (lock granted)');
    } catch (err) {
      tally(results, `${describe(err)} (sqlState ${err.sqlState})`);
    }
    ms.push(performance.now() - t);
    const [[st]] = await conn.query('SELECT @@in_transaction AS inTrx');
    tally(results, `afterwards @@in_transaction=${st.inTrx}`);
    await conn.query('ROLLBACK');
  }
  await conn.end();
  out[label] = { results, ms: { min: Math.round(Math.min(...ms)), p50: Math.round(percentile(ms, 50)), max: Math.round(Math.max(...ms)) } };
}
// the holder was never disturbed (B on node 2 only read-locked its own node's copy of the row)
const [[{ inTrx }]] = await holder.query('SELECT @@in_transaction AS inTrx');
await holder.query('COMMIT');
await holder.end();
console.log(JSON.stringify({ repeat: REPEAT, holderStillInTransaction: inTrx, probes: out }, null, 2));
