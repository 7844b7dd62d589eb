// Shared helpers for the Galera probes. The cluster must be running: node scripts/cluster/galera.mjs start
import mysql from 'mysql2/promise';
import { nodePorts } from '../galera.mjs';

export { mysql };

/** A mysql2 connection to node n (1..3), database `test`. */
export function connect(n, options = {}) {
  return mysql.createConnection({ host: '127.0.0.1', port: nodePorts(n).client, user: 'root', database: 'test', ...options });
}

/** "1213 ER_LOCK_DEADLOCK: Deadlock found ..." or "OK". */
export function describe(err) {
  if (!err) return 'OK';
  const errno = typeof err.errno === 'number' && err.errno > 0 ? err.errno : undefined; // socket errors carry a negative errno
  return [errno, err.code, err.sqlMessage ?? err.message].filter((x) => x !== undefined && x !== null).join(' ');
}

/** Numeric wsrep status counters of one connection's node. */
export async function wsrepCounters(conn, names = ['wsrep_local_bf_aborts', 'wsrep_local_cert_failures', 'wsrep_local_commits', 'wsrep_local_replays']) {
  const [rows] = await conn.query(`SHOW GLOBAL STATUS WHERE Variable_name IN (${names.map(() => '?').join(',')})`, names);
  return Object.fromEntries(rows.map((r) => [r.Variable_name, Number(r.Value)]));
}

export function diff(after, before) {
  return Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function tally(map, key) {
  map[key] = (map[key] ?? 0) + 1;
}

export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
