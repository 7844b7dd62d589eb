import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { median } from './stats.js';

/** Runs a development probe's `main` and exits: 0 when it finished, 1 (its error printed) when it threw. */
export function runProbe(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}

/**
 * Times each shape `ops` times per round, interleaved op by op (the machine is noisy, so drift hits
 * every shape alike), or in blocks of `block` ops of one shape at a time, the blocks interleaved (as
 * the bench's uncontended rounds run them), or with `serial` each shape's ops in a row.
 * `onSample` sees every op's time with its place in its block.
 * @returns per shape, the median of each round, in ms.
 */
export async function timeShapes(
  shapes: Record<string, () => Promise<unknown>>,
  ops: number,
  options: { rounds?: number; serial?: boolean; block?: number; onSample?: (name: string, inBlock: number, ms: number) => void } = {},
): Promise<Record<string, number[]>> {
  const results: Record<string, number[]> = {};
  const block = options.serial ? ops : Math.max(1, options.block ?? 1);
  for (let r = 0; r < (options.rounds ?? 1); r++) {
    const samples: Record<string, number[]> = {};
    for (let done = 0; done < ops; done += block)
      for (const [name, fn] of Object.entries(shapes))
        for (let i = 0; i < Math.min(block, ops - done); i++) {
          const t = performance.now();
          await fn();
          const ms = performance.now() - t;
          (samples[name] ??= []).push(ms);
          options.onSample?.(name, i, ms);
        }
    for (const [name, xs] of Object.entries(samples)) (results[name] ??= []).push(median(xs));
  }
  return results;
}

/** One shape's client CPU (user + system, and user alone) and wall time per op, µs and ms, in one round. */
export interface CpuSample {
  readonly cpu: number;
  readonly user: number;
  readonly wall: number;
}

/**
 * Client CPU per op: each shape's ops in a row (ops / rounds of them), the shapes in turn, for
 * `rounds` rounds, so drift on the host falls on every shape alike. Per shape, each round's sample.
 */
export async function cpuOfShapes(
  shapes: readonly [string, () => Promise<unknown>][],
  ops: number,
  rounds: number,
): Promise<Map<string, CpuSample[]>> {
  const perRound = Math.max(1, Math.floor(ops / rounds));
  const samples = new Map<string, CpuSample[]>(shapes.map(([name]) => [name, []]));
  for (let r = 0; r < rounds; r++)
    for (const [name, fn] of shapes) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < perRound; i++) await fn();
      const cpu = process.cpuUsage(cpu0);
      samples.get(name)!.push({ cpu: (cpu.user + cpu.system) / perRound, user: cpu.user / perRound, wall: (performance.now() - t0) / perRound });
    }
  return samples;
}

/** Prints each shape's median (µs) and its ratio to `baseline`'s (see timeShapes). */
export function printAgainst(samples: Record<string, number[]>, baseline: string): void {
  const base = median(samples[baseline]!);
  const width = Math.max(...Object.keys(samples).map((name) => name.length)) + 1;
  for (const [name, xs] of Object.entries(samples))
    console.log(`${name.padEnd(width)} ${(median(xs) * 1000).toFixed(0)} µs  ${(median(xs) / base).toFixed(2)}x ${baseline}`);
}

/**
 * A probe of statement shapes on one connection, the library's tables and routines installed in a
 * throw-away database with a `counter` row (id 1) to update: `shapesOf` builds the shapes on that
 * connection, each is timed `ops` times per round (5 rounds, interleaved) and printed against `baseline`.
 */
export async function probeShapesOnOneConnection(
  name: string,
  ops: number,
  connection: { multipleStatements: boolean },
  baseline: string,
  shapesOf: (c: mysql.Connection) => Promise<Record<string, () => Promise<unknown>>>,
): Promise<void> {
  const db = await TestDatabase.create(name);
  const { app } = await createLockApp(db.settings, { janitor: false });
  const c = await mysql.createConnection({ ...db.settings, ...connection });
  try {
    await c.query('CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)');
    await c.query('INSERT INTO counter VALUES (1, 0)');
    printAgainst(await timeShapes(await shapesOf(c), ops, { rounds: 5 }), baseline);
  } finally {
    await c.end();
    await app.close();
    await db.drop();
  }
}
