// Probe 2: what a client sees when its COMMIT fails certification.
// Each round: node 1 and node 2 each open a transaction that updates the same row, then both send
// COMMIT at the same moment. The loser's node counters tell why it lost: wsrep_local_cert_failures
// (its write set failed certification at COMMIT) or wsrep_local_bf_aborts (it was aborted by the
// winner's write set before it could replicate).
//
//   node scripts/cluster/probes/02-cert-failure-commit.mjs [rounds=200]
import { connect, describe, tally, wsrepCounters, diff } from './common.mjs';

const ROUNDS = Number(process.argv[2] ?? 200);
const setup = await connect(1);
await setup.query('DROP TABLE IF EXISTS p2');
await setup.query('CREATE TABLE p2 (k INT PRIMARY KEY, v INT NOT NULL)');
await setup.query('INSERT INTO p2 VALUES (1, 0)');
await setup.end();

const sides = [await connect(1), await connect(2)];
const watch = [await connect(1), await connect(2)]; // counters read on separate sessions
const outcome = {};
const byCause = {};
const after = {};
let committed = 0;
for (let i = 0; i < ROUNDS; i++) {
  const before = await Promise.all(watch.map((c) => wsrepCounters(c)));
  for (const c of sides) {
    await c.query('START TRANSACTION');
    await c.query('UPDATE p2 SET v = v + 1 WHERE k = 1');
  }
  const results = await Promise.all(sides.map((c) => c.query('COMMIT').then(() => null, (err) => err)));
  const delta = (await Promise.all(watch.map((c) => wsrepCounters(c)))).map((a, j) => diff(a, before[j]));
  tally(outcome, results.map((e) => (e ? 'fail' : 'ok')).join('+'));
  for (const [j, err] of results.entries()) {
    if (!err) {
      committed++;
      continue;
    }
    const cause = delta[j].wsrep_local_cert_failures > 0 ? 'certification failure' : delta[j].wsrep_local_bf_aborts > 0 ? 'BF abort' : 'other';
    tally(byCause, `${cause}: ${describe(err)} (sqlState ${err.sqlState}, fatal=${err.fatal ?? false})`);
    // is the session still usable, and is the transaction gone?
    const [[row]] = await sides[j].query('SELECT @@in_transaction AS inTrx');
    tally(after, `after the failed COMMIT: connection usable, @@in_transaction=${row.inTrx}`);
  }
}
const [[final]] = await sides[0].query('SELECT v FROM p2 WHERE k = 1');
for (const c of [...sides, ...watch]) await c.end();
console.log(JSON.stringify({ rounds: ROUNDS, commitPairs: outcome, failedCommits: byCause, after, committedCommits: committed, rowValue: final.v }, null, 2));
