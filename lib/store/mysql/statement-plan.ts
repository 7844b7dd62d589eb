import type { LockConnectionPool, LockSession, QueryOptions } from './lock-connection-pool.js';
import type { DedicatedConnection } from './dedicated-connection.js';

/**
 * Several statements that belong together, with the parser of their results right beside them,
 * so no result index is a contract between files. On a single server they go as one
 * multi-statement round trip. On a multi-primary cluster they go one statement per round trip
 * and stop at the first error: a batch whose transaction a replicated write aborted can answer
 * OK for every statement left, COMMIT included, or run the rest in autocommit.
 */
export interface StatementPlan<T> {
  readonly statements: readonly string[];
  parse(results: readonly unknown[]): T;
}

/** Sends `plan` and parses its answer (a handler, not an async frame: every grant and release goes this way). */
export function runPlan<T>(pool: LockConnectionPool, plan: StatementPlan<T>, options: QueryOptions & { oneByOne: boolean }): Promise<T> {
  if (options.oneByOne) return pool.session(options, (session) => runOneByOne(session, plan));
  const single = plan.statements.length === 1;
  return pool
    .query<unknown>(single ? plan.statements[0]! : plan.statements.join(';\n'), options)
    .then((results) => plan.parse(single ? [results] : (results as unknown[])));
}

/**
 * A plan one statement per round trip, then `next` on the very same connection. What `next` reads
 * is what that connection's COMMIT left, on the node that committed it: another connection may be
 * on another node (a proxy balancing connections) that has not applied the commit yet.
 */
export async function runPlanThen<T, R>(
  pool: LockConnectionPool,
  plan: StatementPlan<T>,
  options: QueryOptions,
  next: (result: T, session: LockSession) => Promise<R>,
): Promise<R> {
  return pool.session(options, async (session) => next(await runOneByOne(session, plan), session));
}

/** On a session: each statement in its own round trip; the first error stops the plan. */
export async function runOneByOne<T>(session: LockSession, plan: StatementPlan<T>): Promise<T> {
  const results: unknown[] = [];
  for (const statement of plan.statements) results.push(await session.query(statement));
  return plan.parse(results);
}

/** A plan as one round trip on a connection kept out of the pool (a doorbell's). */
export async function runOn<T>(connection: DedicatedConnection, plan: StatementPlan<T>, deadline = Infinity): Promise<T> {
  const results = await connection.query<unknown>(plan.statements.join(';\n'), deadline);
  return plan.parse(plan.statements.length === 1 ? [results] : (results as unknown[]));
}
