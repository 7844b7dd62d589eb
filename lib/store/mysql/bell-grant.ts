import type { GrantInput, GrantOutcome } from './grant.sql.js';
import type { BellRequest } from './doorbells.js';
import { afterBellClaimPlan, fastSingleKeyGrantPlan, isFastGrantRefusal } from './fast-grant.sql.js';
import { runOn, type StatementPlan } from './statement-plan.js';

/**
 * A grant after a doorbell wait, in one round trip on the bell's connection: the wait, then the
 * grant. The holder that rang has let go, so the next in line is usually granted, and a single
 * key goes at its cheapest shape rather than the full plan: one INSERT where tokens are claimed
 * (afterBellClaimPlan), else the floor's transaction (fastSingleKeyGrantPlan). A refusal of either
 * is an error that stops the batch before any result comes back, so the wait's result is kept in session
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
  if (fast.fits) {
    const claim = input.claims === true ? afterBellClaimPlan(input, fast.serverNow) : undefined;
    const cheapest = claim ?? fastSingleKeyGrantPlan(input, fast.serverNow);
    try {
      const result = claim ? wait.waitResultWith(claim.readBack) : wait.waitResultStatement;
      const results = await runOn(
        wait.connection,
        { statements: [wait.waitIntoStatement, ...cheapest.statements, result], parse: (r) => r },
        deadline,
      );
      // Its results, then the wait's (which carries the claimed token).
      return { outcome: cheapest.parse(results.slice(1)), before: results[results.length - 1] };
    } catch (error) {
      if (!isFastGrantRefusal(error)) throw error;
    }
    // ROLLBACK ends the floor shape's empty transaction (after the claim's autocommit INSERT, a no-op).
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
