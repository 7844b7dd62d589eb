/** What the figures were measured on: machine, database, Redis, Node and library versions. */
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, release, totalmem, type as osType } from 'node:os';
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
  databaseSettings: string;
  redis: string;
  packages: Record<string, string>;
}

function version(pkg: string): string {
  try {
    const path = pkg === '.' ? 'package.json' : `node_modules/${pkg}/package.json`;
    return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

export async function benchEnvironment(admin: mysql.Connection, redis: Redis): Promise<BenchEnvironment> {
  const [[row]] = (await admin.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  const [vars] = (await admin.query(
    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', 'innodb_buffer_pool_size')",
  )) as unknown as [{ Variable_name: string; Value: string }[]];
  const info = await redis.info('server');
  return {
    date: new Date().toISOString(),
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: totalmem() / 2 ** 30,
    os: `${osType()} ${release()}`,
    node: process.version,
    database: row.v,
    databaseSettings: vars.map((v) => `${v.Variable_name}=${v.Value}`).join(', '),
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    packages: Object.fromEntries(
      ['.', 'mysql2', 'typeorm', '@nestjs/core', '@nestjs/typeorm', 'redlock', 'ioredis'].map((p) => [p === '.' ? 'nestjs-db-lock' : p, version(p)]),
    ),
  };
}
