// Probe 7: how to tell a Galera node from a plain server at runtime. Read-only queries only; also run
// against the plain server on 127.0.0.1:3306 (override with PLAIN_URL).
//   node scripts/cluster/probes/07-detection.mjs
import { mysql, describe } from './common.mjs';
import { nodeUrl } from '../galera.mjs';

const targets = [
  ['galera node 1', nodeUrl(1)],
  ['plain server', process.env.PLAIN_URL ?? 'mysql://root@127.0.0.1:3306'],
];
const queries = [
  'SELECT @@version AS version, @@version_comment AS version_comment',
  'SELECT @@wsrep_on AS wsrep_on, @@wsrep_provider AS wsrep_provider, @@wsrep_cluster_address AS cluster_address',
  "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready','wsrep_cluster_size','wsrep_cluster_status','wsrep_local_state_comment','wsrep_provider_name','wsrep_provider_version','wsrep_connected')",
  "SELECT COUNT(*) AS n FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME LIKE 'wsrep\\_%'",
  "SHOW GLOBAL STATUS LIKE 'wsrep_%'",
];
for (const [label, url] of targets) {
  console.log(`## ${label} (${url})`);
  const conn = await mysql.createConnection(url);
  for (const sql of queries) {
    const t = performance.now();
    try {
      const [rows] = await conn.query(sql);
      const ms = (performance.now() - t).toFixed(1);
      const text = sql.startsWith("SHOW GLOBAL STATUS LIKE")
        ? `${rows.length} rows: ${rows.map((r) => r.Variable_name).slice(0, 12).join(', ')}${rows.length > 12 ? ', ...' : ''}`
        : JSON.stringify(sql.startsWith('SHOW') ? Object.fromEntries(rows.map((r) => [r.Variable_name, r.Value])) : rows[0]);
      console.log(`${sql}\n  -> ${text} (${ms} ms)`);
    } catch (err) {
      console.log(`${sql}\n  -> ${describe(err)}`);
    }
  }
  await conn.end();
}
