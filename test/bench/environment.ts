/** What the figures were measured on: machine, host load, database settings, Redis, Node and package versions. */
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, totalmem, type as osType } from 'node:os';
import type { Redis } from 'ioredis';
import type mysql from 'mysql2/promise';

export interface BenchEnvironment {
  date: string;
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  os: string;
  node: string;
  database: string;
  /** Server variables that bound the figures (durability, binary log, buffer pool, lock waits, isolation). */
  databaseVariables: [name: string, value: string][];
  redis: string;
  packages: Record<string, string>;
  /** 1, 5 and 15-minute load averages when the run started. */
  loadAtStart: number[];
}

/** Durability (fsync per commit, binary log) bounds every durable write the figures are made of. */
const VARIABLES = [
  'innodb_flush_log_at_trx_commit',
  'sync_binlog',
  'log_bin',
  'innodb_doublewrite',
  'innodb_flush_method',
  'innodb_buffer_pool_size',
  'innodb_log_file_size',
  'innodb_lock_wait_timeout',
  'tx_isolation',
  'transaction_isolation',
  'max_connections',
  'wsrep_on',
];

function version(pkg: string): string {
  try {
    const path = pkg === '.' ? 'package.json' : `node_modules/${pkg}/package.json`;
    return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

export async function benchEnvironment(admin: mysql.Connection, redis: Redis): Promise<BenchEnvironment> {
  const loadAtStart = loadavg();
  const [[row]] = (await admin.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  const [vars] = (await admin.query('SHOW GLOBAL VARIABLES WHERE Variable_name IN (?)', [VARIABLES])) as unknown as [
    { Variable_name: string; Value: string }[],
  ];
  const info = await redis.info('server');
  return {
    date: new Date().toISOString(),
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: totalmem() / 2 ** 30,
    os: `${osType()} ${release()}`,
    node: process.version,
    database: row.v,
    databaseVariables: VARIABLES.flatMap((name) => {
      const found = vars.find((v) => v.Variable_name === name);
      return found ? [[name, found.Value] as [string, string]] : [];
    }),
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    packages: Object.fromEntries(
      ['.', 'mysql2', 'typeorm', '@nestjs/core', '@nestjs/typeorm', 'redlock', 'ioredis'].map((p) => [p === '.' ? 'nestjs-db-lock' : p, version(p)]),
    ),
    loadAtStart,
  };
}
