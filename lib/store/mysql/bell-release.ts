import type { Bell } from './doorbells.js';
import { runOn, type StatementPlan } from './statement-plan.js';

/**
 * A release by the holder of the key's bell: the release's statements and the ring in one round
 * trip on the bell's connection. Undefined when that round trip failed: the connection is closed
 * (which frees the bell), and the caller sends the release on the pool.
 */
export async function releaseThroughBell(bell: Bell, plan: StatementPlan<number>, deadline: number): Promise<number | undefined> {
  try {
    const ended = await runOn(bell.connection, { statements: [...plan.statements, bell.ringStatement], parse: (r) => plan.parse(r) }, deadline);
    bell.rungWith(true);
    return ended;
  } catch {
    bell.rungWith(false); // the session is closed: its named lock is freed with it
    return undefined;
  }
}
