/** Typed access to scripts/cluster/galera.mjs (the 3-node test bed) from the compiled suite. */
import mysql from 'mysql2/promise';

export interface GaleraBed {
  startCluster(options?: { timeoutMs?: number }): Promise<string[]>;
  stopCluster(options?: { clean?: boolean; graceMs?: number }): Promise<void>;
  killNode(n: number): Promise<number>;
  startNode(n: number, options?: { recover?: boolean; timeoutMs?: number }): Promise<{ ms: number; transfer: string; phases: Record<string, number> }>;
  nodePorts(n: number): { client: number };
  nodePid(n: number): number | null;
}

/** build/test/cluster/galera.js -> scripts/cluster/galera.mjs */
const SCRIPT = new URL('../../../scripts/cluster/galera.mjs', import.meta.url);

export async function galera(): Promise<GaleraBed> {
  return (await import(SCRIPT.href)) as GaleraBed;
}

/** A connection to node n; reads wait until the node has applied every write set it knows of (wsrep_sync_wait), so checks see all commits. */
export async function connectNode(bed: GaleraBed, n: number, database?: string): Promise<mysql.Connection> {
  const conn = await mysql.createConnection({
    host: '127.0.0.1',
    port: bed.nodePorts(n).client,
    user: 'root',
    password: '',
    database,
    multipleStatements: true,
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
  await conn.query('SET SESSION wsrep_sync_wait = 1');
  return conn;
}
