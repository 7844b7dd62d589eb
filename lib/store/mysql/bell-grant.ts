import type { GrantInput, GrantOutcome } from './grant.sql.js';
import type { BellRequest } from './doorbells.js';
import { afterBellClaimPlan, fastSingleKeyGrantPlan, isFastGrantRefusal } from './fast-grant.sql.js';
import { runOn, type StatementPlan } from './statement-plan.js';

/**
 * A grant after a doorbell wait, in one round trip on the bell's connection: the wait, then the
 * grant. The holder that rang has let go, so the next in line is usually granted, and a single
 * key goes at its cheapest shape rather than the full plan: one INSERT where tokens are claimed
 * (afterBellClaimPlan), else the floor's transaction (fastSingleKeyGrantPlan). A refusal of the
 * latter stops that batch before any result comes back, so the wait's result is kept in session
 * variables; the follow-up (one more round trip) rolls back the empty transaction, reads them and
 * sends the full plan, which decides again and says why.
 * @returns the outcome, and the wait's result (`before`) in the shape of the plain wait statement's.
 */
export async function grantAfterBell(
  input: GrantInput,
  wait: BellRequest,
  plan: () => StatementPlan<GrantOutcome>,
  fast: { readonly fits: boolean; readonly serverNow: () => number },
  deadline: number,
): Promise<{ outcome: GrantOutcome; before: unknown }> {
  if (fast.fits && input.claims === true) {
    // The wait, one INSERT, and the wait's result with the claimed token. A refusal stops the batch
    // after the INSERT, which wrote nothing: the follow-up reads the wait's result and sends the full plan.
    const claim = afterBellClaimPlan(input, fast.serverNow);
    try {
      const statements = [wait.waitIntoStatement, ...claim.statements, wait.waitResultWith(claim.readBack)];
      const results = await runOn(wait.connection, { statements, parse: (r) => r }, deadline);
      return { outcome: claim.parse(results.slice(1)), before: results[results.length - 1] };
    } catch (error) {
      if (!isFastGrantRefusal(error)) throw error;
    }
    const full = plan();
    const results = await runOn(wait.connection, { statements: [wait.waitResultStatement, ...full.statements], parse: (r) => r }, deadline);
    return { outcome: full.parse(results.slice(1)), before: results[0] };
  }
  if (fast.fits) {
    const floorShape = fastSingleKeyGrantPlan(input, fast.serverNow);
    try {
      const statements = [wait.waitIntoStatement, ...floorShape.statements, wait.waitResultStatement];
      const results = await runOn(wait.connection, { statements, parse: (r) => r }, deadline);
      return { outcome: floorShape.parse(results.slice(1, 1 + floorShape.statements.length)), before: results[results.length - 1] };
    } catch (error) {
      if (!isFastGrantRefusal(error)) throw error;
    }
    const full = plan();
    const results = await runOn(
      wait.connection,
      { statements: ['ROLLBACK', wait.waitResultStatement, ...full.statements], parse: (r) => r },
      deadline,
    );
    return { outcome: full.parse(results.slice(2)), before: results[1] };
  }
  const full = plan();
  const results = await runOn(wait.connection, { statements: [wait.waitStatement, ...full.statements], parse: (r) => r }, deadline);
  return { outcome: full.parse(results.slice(1)), before: results[0] };
}
