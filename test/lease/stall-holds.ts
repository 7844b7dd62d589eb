/** How a stall scenario's holder holds while its test stops the process (see stall-scenarios.ts). */

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Blocks the event loop for `ms` (a CPU-bound stall: no timer or I/O callback runs meanwhile). */
export function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* spin */
  }
}

/** A gap this long between two 20 ms ticks means the process was stopped and continued (every test's stop is longer). */
const STOPPED_GAP_MS = 1_000;

/**
 * A holder's hold: `holdMs`, and with `untilStopped` at least until the process has been stopped
 * and continued (at most a minute). The tests send SIGSTOP once every holder is inside; a hold on
 * a timer alone can end first when the holders get inside far apart on a loaded machine, and its
 * work then commits before the stall it was meant to span.
 */
export async function hold(args: { holdMs: number; untilStopped?: boolean }): Promise<void> {
  if (!args.untilStopped) return sleep(args.holdMs);
  const started = performance.now();
  let stopped = false;
  for (let last = started; !(stopped && last - started >= args.holdMs) && last - started < 60_000;) {
    await sleep(20);
    const now = performance.now();
    stopped ||= now - last > STOPPED_GAP_MS;
    last = now;
  }
}
