// A node's wsrep state over its socket, and waiting until the cluster is synced.
import { readFileSync } from 'node:fs';
import mysql from 'mysql2/promise';
import { NODES, paths, sleep } from './layout.mjs';
import { nodePid } from './processes.mjs';

export async function socketQuery(n, sql, timeoutMs = 2000) {
  const conn = await mysql.createConnection({ socketPath: paths(n).socket, user: 'root', connectTimeout: timeoutMs });
  try {
    const [rows] = await conn.query({ sql, timeout: timeoutMs });
    return rows;
  } finally {
    conn.destroy();
  }
}

/** wsrep_* status of node n as an object, or null when the node does not answer. */
export async function nodeStatus(n) {
  try {
    const rows = await socketQuery(
      n,
      "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready','wsrep_cluster_size','wsrep_local_state_comment','wsrep_cluster_status','wsrep_connected')",
    );
    return Object.fromEntries(rows.map((r) => [r.Variable_name, r.Value]));
  } catch {
    return null;
  }
}

function synced(s, size) {
  return s && s.wsrep_ready === 'ON' && Number(s.wsrep_cluster_size) === size && s.wsrep_local_state_comment === 'Synced';
}

export function tail(file, lines = 25) {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Waits until every node in `nodes` is Synced, ready and sees a cluster of `size`; throws with the logs' tails on timeout. */
export async function waitSynced(nodes = NODES, { size = NODES.length, timeoutMs = 90_000, trace = null } = {}) {
  const start = Date.now();
  const end = start + timeoutMs;
  let last = {};
  while (Date.now() < end) {
    for (const n of nodes) {
      if (!nodePid(n)) throw failure(`node ${n} exited`, nodes, last);
    }
    last = Object.fromEntries(await Promise.all(nodes.map(async (n) => [n, await nodeStatus(n)])));
    // trace: {node, phases}: when node first answered in each wsrep state (ms since the wait began)
    if (trace) {
      const state = last[trace.node]?.wsrep_local_state_comment ?? 'not answering';
      trace.phases[state] ??= Date.now() - start;
    }
    if (nodes.every((n) => synced(last[n], size))) return last;
    await sleep(200);
  }
  throw failure(`timed out after ${timeoutMs} ms waiting for cluster_size=${size}, wsrep_ready=ON, Synced`, nodes, last);
}

function failure(msg, nodes, last) {
  const parts = [msg];
  for (const n of nodes) {
    parts.push(`--- node ${n} status: ${JSON.stringify(last[n] ?? null)}; tail of ${paths(n).err}:\n${tail(paths(n).err)}`);
  }
  return new Error(parts.join('\n'));
}
