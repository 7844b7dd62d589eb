import type mysql from 'mysql2/promise';
import type { GaleraBed } from './galera.js';
import { AUDIT_TABLE, COUNTER_TABLE, HEARTBEAT_TABLE } from './sections.js';
import type { Lib } from './target.js';
import { ClusterWorker } from './worker-handle.js';

export const DATABASE = 'dblock_cluster';
/**
 * Longer than the ~6.3 s freeze a node death causes, with the margin the README asks for.
 * DBLOCK_CLUSTER_LEASE_MS overrides it to measure where holders start losing locks in the freeze.
 */
export const LONG_LEASE_MS = Number(process.env.DBLOCK_CLUSTER_LEASE_MS ?? 15_000);
/** Shorter than that freeze: holders caught by it must lose their locks. */
export const SHORT_LEASE_MS = 2_000;
/** Wait budget of every call: survivors may wait through the freeze plus a dead holder's lease. */
export const TIMEOUT_MS = 30_000;

/**
 * A fresh database on the cluster (DDL replicates to every node): the lock tables from the
 * migrations of the library under test, a counter and an audit table. Galera needs a primary
 * key on every table.
 */
export async function setupDatabase(conn: mysql.Connection, lib: Lib): Promise<string> {
  await conn.query(`DROP DATABASE IF EXISTS \`${DATABASE}\``);
  await conn.query(`CREATE DATABASE \`${DATABASE}\``);
  await conn.query(`USE \`${DATABASE}\``);
  for (const Migration of lib.DB_LOCK_MIGRATIONS as unknown as (new () => { up(runner: unknown): Promise<void> })[]) {
    await new Migration().up({ query: async (sql: string, params?: unknown[]) => (await conn.query(sql, params))[0] });
  }
  await conn.query(`CREATE TABLE ${COUNTER_TABLE} (k VARCHAR(64) PRIMARY KEY, value INT NOT NULL) ENGINE=InnoDB`);
  await conn.query(`CREATE TABLE ${HEARTBEAT_TABLE} (worker VARCHAR(16) PRIMARY KEY, beats INT NOT NULL) ENGINE=InnoDB`);
  await conn.query(
    `CREATE TABLE ${AUDIT_TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL, kind VARCHAR(16) NOT NULL, ` +
      `worker VARCHAR(16) NOT NULL, node INT NOT NULL, token BIGINT NOT NULL, value_read INT NOT NULL, ` +
      `t_read DATETIME(6) NOT NULL, t_write DATETIME(6) NOT NULL, KEY (k, t_read)) ENGINE=InnoDB`,
  );
  return DATABASE;
}

/** One worker per entry of `nodes` (the node its DataSource points at), started together; each is added to `registry` at once so a failure still stops it. */
export async function startWorkers(bed: GaleraBed, database: string, nodes: number[], unsafeBatch: boolean, registry: ClusterWorker[]): Promise<ClusterWorker[]> {
  const started = await Promise.all(
    nodes.map(async (node, i) => {
      const worker = await ClusterWorker.start({
        name: `w${i + 1}n${node}`,
        node,
        port: bed.nodePorts(node).client,
        database,
        longLeaseMs: LONG_LEASE_MS,
        shortLeaseMs: SHORT_LEASE_MS,
        timeoutMs: TIMEOUT_MS,
        unsafeBatch,
      });
      registry.push(worker);
      return worker;
    }),
  );
  return started;
}
