/**
 * Hot-key contention on PostgreSQL: `processes` processes × `callers` callers on one key, each hold
 * incrementing one counter row, per design (the bare locks and the library's two strategies),
 * designs interleaved round by round so drifting load hits each alike.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchConfig } from '../config.js';
import { PgTestDatabase } from '../../support/pg-test-database.js';
import { type Figure, figure, percentile } from '../stats.js';

export const PG_DESIGNS = ['for-update', 'advisory', 'lease', 'lease-by-hand', 'row-lock', 'row-lock-by-hand'] as const;
export type PgDesign = (typeof PG_DESIGNS)[number];

/** A throw-away database for the PostgreSQL probes: the library's schema, and the counter row (id 1) each hold increments. */
export async function counterDatabase(): Promise<PgTestDatabase> {
  const db = await PgTestDatabase.create('dblock_probe_pg');
  try {
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE bench_counter (id int PRIMARY KEY, v bigint NOT NULL)');
    await dataSource.query('INSERT INTO bench_counter VALUES (1, 0)');
    await dataSource.destroy();
    return db;
  } catch (error) {
    await db.drop();
    throw error;
  }
}

export interface PgContentionFigures {
  /** Holds per second, all processes together. */
  readonly throughput: Figure;
  /** 99th percentile of one hold's latency (the wait and the increment), ms. */
  readonly p99: Figure;
  /** CPU time of the contending processes (all of them, every thread) per hold in the window, ms: the clients' share of a CPU-bound host. */
  readonly clientCpuPerHold: Figure;
  /** The same for their main threads alone (JavaScript and I/O, no GC or compiler threads), ms; undefined where /proc does not say. */
  readonly mainThreadCpuPerHold?: Figure;
}

const CHILD = fileURLToPath(new URL('./pg-contender.child.js', import.meta.url));

/** Unrecorded warm-up inside each round, ms (connections opened, code past the JIT's first tiers). */
const ROUND_WARMUP_MS = 700;

export async function runPgContention(
  url: string,
  config: BenchConfig,
  log: (line: string) => void,
  designs: readonly PgDesign[] = PG_DESIGNS,
): Promise<Map<PgDesign, PgContentionFigures>> {
  const throughput = new Map<PgDesign, number[]>(designs.map((d) => [d, []]));
  const p99 = new Map<PgDesign, number[]>(designs.map((d) => [d, []]));
  const cpu = new Map<PgDesign, number[]>(designs.map((d) => [d, []]));
  const mainCpu = new Map<PgDesign, number[]>(designs.map((d) => [d, []]));
  for (let round = 0; round < config.rounds; round++) {
    // Each round in another order: the first design of a round meets a host that just started processes.
    const order = designs.map((_, i) => designs[(i + round) % designs.length]!);
    for (const design of order) {
      const out = await oneRound(design, url, config);
      throughput.get(design)!.push(out.holds / (config.contentionWindowMs / 1000));
      p99.get(design)!.push(percentile(out.waits, 0.99));
      cpu.get(design)!.push(out.cpuMs / Math.max(1, out.holds));
      if (out.mainCpuMs !== undefined) mainCpu.get(design)!.push(out.mainCpuMs / Math.max(1, out.holds));
    }
    log(`  postgres contention round ${round + 1}/${config.rounds} done`);
  }
  return new Map(
    designs.map((d) => {
      const main = mainCpu.get(d)!;
      const figures = { throughput: figure(throughput.get(d)!), p99: figure(p99.get(d)!), clientCpuPerHold: figure(cpu.get(d)!) };
      return [d, main.length === config.rounds ? { ...figures, mainThreadCpuPerHold: figure(main) } : figures];
    }),
  );
}

interface ContenderOutput {
  holds: number;
  waits: number[];
  cpuMs: number;
  mainCpuMs?: number;
}

async function oneRound(design: PgDesign, url: string, config: BenchConfig): Promise<ContenderOutput> {
  const children = Array.from({ length: config.processes }, () =>
    spawn(
      process.execPath,
      [CHILD, design, url, String(config.callersPerProcess), String(ROUND_WARMUP_MS), String(config.contentionWindowMs), String(config.warmupOps)],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    ),
  );
  const outputs = children.map((child) => {
    let text = '';
    child.stdout!.on('data', (chunk) => (text += String(chunk)));
    const ready = new Promise<void>((resolve, reject) => {
      const check = () => (text.includes('READY') ? resolve() : undefined);
      child.stdout!.on('data', check);
      child.once('exit', (code) => reject(new Error(`a ${design} contender exited (${code}) before it was ready`)));
    });
    const exited = new Promise<string>((resolve, reject) =>
      child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`a ${design} contender failed (${code})`)))),
    );
    return { child, ready, exited };
  });
  try {
    await Promise.all(outputs.map((o) => o.ready));
    for (const o of outputs) o.child.stdin!.end('GO\n');
    const texts = await Promise.all(outputs.map((o) => o.exited));
    const parsed = texts.map((text) => JSON.parse(text.trim().split('\n').pop()!) as ContenderOutput);
    const main = parsed.every((p) => p.mainCpuMs !== undefined) ? parsed.reduce((n, p) => n + p.mainCpuMs!, 0) : undefined;
    return {
      holds: parsed.reduce((n, p) => n + p.holds, 0),
      waits: parsed.flatMap((p) => p.waits),
      cpuMs: parsed.reduce((n, p) => n + p.cpuMs, 0),
      mainCpuMs: main,
    };
  } finally {
    for (const o of outputs) if (o.child.exitCode === null) o.child.kill('SIGKILL');
  }
}
