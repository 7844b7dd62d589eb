import type { LockConnectionPool, LockSession, QueryOptions } from './lock-connection-pool.js';
import type { DedicatedConnection } from './dedicated-connection.js';
import { LockStatementError } from '../lock-statement.error.js';

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

/** Sends `plan` and parses its answer in the driver's callback (see LockConnectionPool.queryThen); `rescue` handles a failure. */
export function runPlan<T>(
  pool: LockConnectionPool,
  plan: StatementPlan<T>,
  options: QueryOptions & { oneByOne: boolean },
  rescue?: (error: LockStatementError) => T | Promise<T>,
): Promise<T> {
  if (options.oneByOne) {
    const sent = pool.session(options, (session) => runOneByOne(session, plan));
    return rescue ? sent.catch((error: unknown) => rescue(LockStatementError.from(error))) : sent;
  }
  if (plan.statements.length === 1) return pool.queryThen(plan.statements[0]!, options, (result) => plan.parse([result]), rescue);
  return pool.queryThen(plan.statements.join(';\n'), options, (results) => plan.parse(results as unknown[]), rescue);
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

/** On a session: one round trip on a single server, one per statement on a multi-primary cluster (see StatementPlan). */
export async function runInSession<T>(session: LockSession, plan: StatementPlan<T>, oneByOne: boolean): Promise<T> {
  if (oneByOne) return runOneByOne(session, plan);
  if (plan.statements.length === 1) return plan.parse([await session.query(plan.statements[0]!)]);
  return plan.parse(await session.query<unknown[]>(plan.statements.join(';\n')));
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
