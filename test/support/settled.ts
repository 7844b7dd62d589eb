/** Helpers for tests that must never hang on a call under test, and report what it settled with. */

/** `p`, or a rejection naming `what` if it has not settled within `ms` (a hang). */
export async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms (hang)`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** What `p` settled with, as a value: its value, or its error. */
export const outcome = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ value, error: undefined as unknown }),
    (error: unknown) => ({ value: undefined as T | undefined, error }),
  );

/** What `p` settled with, and how long it took to, ms. */
export async function timedOutcome<T>(p: () => Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
  const t0 = performance.now();
  const settled = await outcome(p());
  return { ...settled, ms: performance.now() - t0 };
}

/** An error's class, name and message, for assertion messages. */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return `a non-error ${String(error)}`;
  return `${error.constructor.name} (name ${error.name}): ${error.message}`;
}

/** The driver's error code of a statement failure (TypeORM's QueryFailedError carries it, as does its driverError). */
export function driverCodeOf(error: unknown): unknown {
  const e = error as { code?: unknown; driverError?: { code?: unknown } } | undefined;
  return e?.code ?? e?.driverError?.code;
}
