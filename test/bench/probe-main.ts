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
 * every shape alike) or, with `serial`, each shape's ops in a row as the bench's rounds run them.
 * @returns per shape, the median of each round, in ms.
 */
export async function timeShapes(
  shapes: Record<string, () => Promise<unknown>>,
  ops: number,
  options: { rounds?: number; serial?: boolean } = {},
): Promise<Record<string, number[]>> {
  const results: Record<string, number[]> = {};
  for (let r = 0; r < (options.rounds ?? 1); r++) {
    const samples: Record<string, number[]> = {};
    const time = async (name: string, fn: () => Promise<unknown>) => {
      const t = performance.now();
      await fn();
      (samples[name] ??= []).push(performance.now() - t);
    };
    if (options.serial) for (const [name, fn] of Object.entries(shapes)) for (let i = 0; i < ops; i++) await time(name, fn);
    else for (let i = 0; i < ops; i++) for (const [name, fn] of Object.entries(shapes)) await time(name, fn);
    for (const [name, xs] of Object.entries(samples)) (results[name] ??= []).push(median(xs));
  }
  return results;
}
