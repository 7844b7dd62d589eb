// Probe 4: named locks (GET_LOCK) under wsrep.
//   node scripts/cluster/probes/04-get-lock.mjs
import { connect, describe } from './common.mjs';

async function run(conn, sql) {
  try {
    const [rows] = await conn.query(sql);
    return `-> ${JSON.stringify(rows[0] ?? rows)}`;
  } catch (err) {
    return `-> ${describe(err)} (sqlState ${err.sqlState})`;
  }
}

const a = await connect(1);
const b = await connect(2);
const c = await connect(1);
const log = [];
const step = async (label, conn, sql) => log.push(`${label} ${sql} ${await run(conn, sql)}`);
await step('A(node 1)', a, 'SELECT @@wsrep_on AS wsrep_on');
await step('A(node 1)', a, "SELECT GET_LOCK('p4', 0) AS r");
await step('A(node 1)', a, 'SHOW WARNINGS');
await step('C(node 1)', c, "SELECT GET_LOCK('p4', 0) AS r");
await step('C(node 1)', c, "SELECT IS_USED_LOCK('p4') = CONNECTION_ID() AS mine, IS_USED_LOCK('p4') IS NOT NULL AS used");
await step('B(node 2)', b, "SELECT IS_FREE_LOCK('p4') AS r");
await step('B(node 2)', b, "SELECT GET_LOCK('p4', 0) AS r");
await step('A(node 1)', a, "SELECT RELEASE_LOCK('p4') AS r");
await step('B(node 2)', b, "SELECT RELEASE_LOCK('p4') AS r");
// the same with wsrep switched off for the sessions (needs SUPER)
for (const [label, x] of [['A(node 1)', a], ['B(node 2)', b], ['C(node 1)', c]]) await step(label, x, 'SET SESSION wsrep_on = OFF');
await step('A(node 1)', a, "SELECT GET_LOCK('p4', 0) AS r");
await step('C(node 1)', c, "SELECT GET_LOCK('p4', 0) AS r");
await step('B(node 2)', b, "SELECT GET_LOCK('p4', 0) AS r");
await step('A(node 1)', a, 'SELECT RELEASE_ALL_LOCKS() AS r');
await step('B(node 2)', b, 'SELECT RELEASE_ALL_LOCKS() AS r');
for (const x of [a, b, c]) await x.end();
console.log(log.join('\n'));
