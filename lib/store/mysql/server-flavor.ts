import type { LockConnectionPool } from './lock-connection-pool.js';
import { LockStatementError } from '../lock-statement.error.js';
import { rowsOf } from './sql.js';

/**
 * What the library needs to know about the server, read once at bootstrap:
 * - MariaDB and MySQL spell a shared row lock differently (`LOCK IN SHARE MODE` / `FOR SHARE`)
 *   and bound a statement differently (`SET STATEMENT max_statement_time=… FOR` / none for writes);
 * - on a multi-primary cluster (Galera) a multi-statement transaction aborted by a replicated
 *   write can still answer OK, so grants go one statement per round trip and are confirmed from
 *   the committed state; named locks are node-local there, so doorbells are off.
 */
export interface ServerFlavor {
  readonly kind: 'mariadb' | 'mysql';
  readonly version: string;
  /** 'galera' (MariaDB/Percona XtraDB Cluster with wsrep_on), 'group-replication' (MySQL InnoDB Cluster member), or 'none'. */
  readonly cluster: 'none' | 'galera' | 'group-replication';
  /** Clause taking a shared row lock. */
  readonly sharedLockClause: 'LOCK IN SHARE MODE' | 'FOR SHARE';
  /** MariaDB's per-statement time limit (fractional seconds) bounds row-lock waits below a second. */
  readonly statementTimeLimit: boolean;
}

export const SINGLE_MARIADB: ServerFlavor = Object.freeze({
  kind: 'mariadb',
  version: 'unknown',
  cluster: 'none',
  sharedLockClause: 'LOCK IN SHARE MODE',
  statementTimeLimit: true,
});

export async function detectServerFlavor(pool: LockConnectionPool): Promise<ServerFlavor> {
  const [info] = rowsOf(await pool.query(`SELECT VERSION() AS version, @@version_comment AS comment`, { purpose: 'admin' }));
  const version = String(info?.version ?? '');
  const mariadb = /mariadb/i.test(version) || /mariadb/i.test(String(info?.comment ?? ''));
  let cluster: ServerFlavor['cluster'] = 'none';
  if (mariadb || /percona xtradb cluster/i.test(String(info?.comment ?? ''))) {
    // The global value: the session's can be switched off by a privileged user, the node still replicates.
    const wsrep = await optionalValue(pool, `SELECT @@global.wsrep_on AS v`);
    if (wsrep === '1' || wsrep === 'ON') cluster = 'galera';
  }
  if (!mariadb && cluster === 'none') {
    const members = await optionalValue(pool, `SELECT COUNT(*) AS v FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE'`);
    if (Number(members ?? 0) > 0) cluster = 'group-replication';
  }
  return Object.freeze({
    kind: mariadb ? 'mariadb' : 'mysql',
    version,
    cluster,
    sharedLockClause: mariadb ? 'LOCK IN SHARE MODE' : 'FOR SHARE',
    statementTimeLimit: mariadb,
  });
}

/** A value that may not exist on this server kind (unknown variable or table): undefined then. */
async function optionalValue(pool: LockConnectionPool, sql: string): Promise<string | undefined> {
  try {
    const [row] = rowsOf(await pool.query(sql, { purpose: 'admin' }));
    return row?.v === undefined || row.v === null ? undefined : String(row.v);
  } catch (error) {
    if (error instanceof LockStatementError && (error.kind === 'other' || error.kind === 'schema' || error.kind === 'denied')) return undefined;
    throw error;
  }
}
