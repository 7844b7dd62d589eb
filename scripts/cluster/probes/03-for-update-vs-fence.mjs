// Probe 3: does SELECT ... FOR UPDATE exclude a session on another node? Does an UPDATE "fence"?
// Every step is timed; innodb_lock_wait_timeout=2 so a lock wait shows as ~2000 ms + error 1205.
//
//   node scripts/cluster/probes/03-for-update-vs-fence.mjs [fenceRounds=100]
import { connect, describe, tally } from './common.mjs';

const ROUNDS = Number(process.argv[2] ?? 100);
const setup = await connect(1);
await setup.query('DROP TABLE IF EXISTS p3_lock, p3_work');
await setup.query('CREATE TABLE p3_lock (k INT PRIMARY KEY, v INT NOT NULL)');
await setup.query('CREATE TABLE p3_work (id INT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(20))');
await setup.query('INSERT INTO p3_lock VALUES (1, 0)');
await setup.end();

async function step(conn, sql) {
  const t = performance.now();
  try {
    await conn.query(sql);
    return `${describe(null)} (${Math.round(performance.now() - t)} ms)`;
  } catch (err) {
    return `${describe(err)} (${Math.round(performance.now() - t)} ms)`;
  }
}

async function pair(nodeA, nodeB) {
  const a = await connect(nodeA);
  const b = await connect(nodeB);
  for (const c of [a, b]) await c.query('SET SESSION innodb_lock_wait_timeout = 2');
  return [a, b];
}

async function scenario(title, nodeA, nodeB, steps) {
  const [a, b] = await pair(nodeA, nodeB);
  const log = [];
  for (const [who, sql] of steps) log.push(`${who}(node ${who === 'A' ? nodeA : nodeB}) ${sql} -> ${await step(who === 'A' ? a : b, sql)}`);
  await a.query('ROLLBACK').catch(() => {});
  await b.query('ROLLBACK').catch(() => {});
  await a.end();
  await b.end();
  return { title, log };
}

const out = [];
out.push(
  await scenario('control, same node: FOR UPDATE blocks a second FOR UPDATE', 1, 1, [
    ['A', 'START TRANSACTION'],
    ['A', 'SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE'],
    ['B', 'START TRANSACTION'],
    ['B', 'SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE'],
  ]),
);
out.push(
  await scenario('two nodes: FOR UPDATE on both, both do their work and commit', 1, 2, [
    ['A', 'START TRANSACTION'],
    ['A', 'SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE'],
    ['B', 'START TRANSACTION'],
    ['B', 'SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE'],
    ['A', "INSERT INTO p3_work (who) VALUES ('A')"],
    ['B', "INSERT INTO p3_work (who) VALUES ('B')"],
    ['A', 'COMMIT'],
    ['B', 'COMMIT'],
  ]),
);
out.push(
  await scenario('two nodes: A holds FOR UPDATE, B writes the row (autocommit), then A goes on', 1, 2, [
    ['A', 'START TRANSACTION'],
    ['A', 'SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE'],
    ['B', 'UPDATE p3_lock SET v = v + 1 WHERE k = 1'],
    ['A', "INSERT INTO p3_work (who) VALUES ('A')"],
    ['A', 'COMMIT'],
  ]),
);
out.push(
  await scenario('two nodes: A holds FOR UPDATE and is idle, B writes the row, A commits without another statement', 1, 2, [
    ['A', 'START TRANSACTION'],
    ['A', 'SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE'],
    ['A', "INSERT INTO p3_work (who) VALUES ('A')"],
    ['B', 'UPDATE p3_lock SET v = v + 1 WHERE k = 1'],
    ['A', 'COMMIT'],
  ]),
);
out.push(
  await scenario('two nodes: UPDATE fence on both, B commits first', 1, 2, [
    ['A', 'START TRANSACTION'],
    ['A', 'UPDATE p3_lock SET v = v + 1 WHERE k = 1'],
    ['B', 'START TRANSACTION'],
    ['B', 'UPDATE p3_lock SET v = v + 1 WHERE k = 1'],
    ['B', "INSERT INTO p3_work (who) VALUES ('B')"],
    ['B', 'COMMIT'],
    ['A', "INSERT INTO p3_work (who) VALUES ('A')"],
    ['A', 'COMMIT'],
  ]),
);

// Fence rounds: both sides fence + work, COMMITs sent together. At most one may commit.
const [a, b] = await pair(1, 2);
const fence = {};
const forUpdate = {};
const [[{ v: v0 }]] = await a.query('SELECT v FROM p3_lock WHERE k = 1');
for (const [mode, tallyInto] of [
  ['UPDATE p3_lock SET v = v + 1 WHERE k = 1', fence],
  ['SELECT v FROM p3_lock WHERE k = 1 FOR UPDATE', forUpdate],
]) {
  for (let i = 0; i < ROUNDS; i++) {
    const r = await Promise.all(
      [a, b].map(async (c, j) => {
        try {
          await c.query('START TRANSACTION');
          await c.query(mode);
          await c.query(`INSERT INTO p3_work (who) VALUES ('${j ? 'B' : 'A'}')`);
          await c.query('COMMIT');
          return 'commit';
        } catch (err) {
          await c.query('ROLLBACK').catch(() => {});
          return `error ${err.errno}`;
        }
      }),
    );
    tally(tallyInto, `A ${r[0]}, B ${r[1]}`);
  }
}
await a.query('SET SESSION wsrep_sync_wait = 1');
const [[{ v: v1 }]] = await a.query('SELECT v FROM p3_lock WHERE k = 1');
await a.end();
await b.end();
const fenceCommits = Object.entries(fence).reduce((s, [k, n]) => s + n * (k.match(/commit/g)?.length ?? 0), 0);
out.push({
  title: `${ROUNDS} concurrent rounds, node 1 vs node 2, each: START; <lock>; INSERT work; COMMIT`,
  updateFence: fence,
  fenceCommits,
  fenceRowIncrements: v1 - v0,
  selectForUpdate: forUpdate,
});
console.log(JSON.stringify(out, null, 2));
