import type { QueryRunner } from 'typeorm';
import type { LockTarget } from '../../core/lock-key.js';
import type { RowLockTake as TakeResult } from '../lock-store.js';
import type { ServerFlavor } from './server-flavor.js';
import { groupsOf, type KeyGroup } from '../key-groups.js';
import { keyText, rowsOf } from './sql.js';
import { boundedInStatement, lockKeyRowsBounded, readTokens, takeClaimedWriteKeys, takeWriteKeys, takeWriteKeysBounded } from './row-lock.sql.js';
import { callBeginAndTake } from './session-routines.sql.js';
import { type ResultHeader, sessionQuery } from './session-query.js';

function waitLeft(deadline: number): number {
  return deadline === Infinity ? Infinity : deadline - performance.now();
}

/** The rows' locks, waited for within the budget: their keys, tokens and lease markers. */
async function lockRows(runner: QueryRunner, group: KeyGroup, deadline: number, flavor: ServerFlavor): Promise<Record<string, unknown>[]> {
  return rowsOf(await sessionQuery(runner, lockKeyRowsBounded(group.keys, group.mode, flavor, waitLeft(deadline))));
}

/** Every row is there and says no lease holder can be live. */
function takeable(rows: readonly Record<string, unknown>[], group: KeyGroup): boolean {
  return rows.length === group.keys.length && rows.every((row) => Number(row.no_lease_holders) === 1);
}

/** Writers' new tokens: in the OK packet for one key, read back (our own rows) for several. */
async function bumped(runner: QueryRunner, group: KeyGroup, result: ResultHeader, tokens: Map<string, number>) {
  if (group.keys.length === 1) tokens.set(group.stored[0]!, Number(result.insertId));
  else for (const row of rowsOf(await sessionQuery(runner, readTokens(group.keys)))) tokens.set(keyText(row.lock_key), Number(row.fencing_token));
}

/**
 * Takes the keys in the business transaction `runner` has open, waiting in the server within
 * what is left of the caller's budget: for a single key, one statement. Every process takes keys
 * in the same order whatever their modes, so two multi-key requests never deadlock on each other.
 * 'check-log' when a key's row says a lease holder may be live (or is missing): the caller goes
 * on to takeKeysChecked.
 * @throws the driver's error when the wait bound ran out, the statement deadlocked, or the connection broke.
 */
export async function takeKeys(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, flavor: ServerFlavor): Promise<TakeResult> {
  const tokens = new Map<string, number>();
  for (const group of groupsOf(targets)) {
    if (group.mode === 'write') {
      const { lockFirst, update } = takeWriteKeysBounded(group.keys, flavor, waitLeft(deadline));
      // MySQL: the bounded read already says whether the UPDATE can take the rows.
      if (lockFirst !== undefined && !takeable(rowsOf(await sessionQuery(runner, lockFirst)), group)) return { taken: false, why: 'check-log' };
      const result = await sessionQuery<ResultHeader>(runner, update);
      if (Number(result.affectedRows) < group.keys.length) return { taken: false, why: 'check-log' };
      await bumped(runner, group, result, tokens);
    } else {
      const rows = await lockRows(runner, group, deadline, flavor);
      if (!takeable(rows, group)) return { taken: false, why: 'check-log' };
      for (const row of rows) tokens.set(keyText(row.lock_key), Number(row.fencing_token));
    }
  }
  return { taken: true, tokens };
}

/**
 * The begin-and-take routine's CALL when the request is one write key (see session-routines.sql.ts),
 * bounded by what is left of the budget; undefined when the transaction must open apart (several
 * keys, a reader, or MySQL with a finite wait).
 */
export function beginAndTakeCall(targets: readonly LockTarget[], deadline: number, flavor: ServerFlavor): string | undefined {
  const only = targets.length === 1 ? targets[0]! : undefined;
  if (only?.mode !== 'write') return undefined;
  return boundedInStatement(callBeginAndTake(only.bytes), flavor, waitLeft(deadline));
}

/** What the routine answered: its one-row result (the CALL's own OK packet follows it). */
export function takenByCall(answer: unknown, targets: readonly LockTarget[]): TakeResult {
  const row = rowsOf((answer as unknown[])[0])[0];
  if (Number(row?.taken) !== 1) return { taken: false, why: 'check-log' };
  return { taken: true, tokens: new Map<string, number>().set(targets[0]!.storedKey, Number(row!.token)) };
}

/**
 * Rare path (a key a lease used since its last row-lock writer, or its first use): the rows are
 * locked first, then `leaseHolders` reads the log fresh elsewhere (a lease grant of these keys
 * cannot commit meanwhile: it needs these rows), and only then are the keys taken. Writers reopen
 * the one-statement path for the holders after them.
 */
export async function takeKeysChecked(
  runner: QueryRunner,
  targets: readonly LockTarget[],
  deadline: number,
  flavor: ServerFlavor,
  leaseHolders: () => Promise<{ live: number; claimed?: ReadonlyMap<string, number> }>,
): Promise<TakeResult> {
  const current = new Map<string, number>();
  for (const group of groupsOf(targets))
    for (const row of await lockRows(runner, group, deadline, flavor)) current.set(keyText(row.lock_key), Number(row.fencing_token));
  if (current.size < targets.length) return { taken: false, why: 'missing-key-rows' };
  const { live, claimed } = await leaseHolders();
  if (live > 0) return { taken: false, why: 'lease-holder' };
  const tokens = new Map<string, number>();
  for (const group of groupsOf(targets)) {
    // Where tokens are claimed a reader's token is its claim's: the key row may lag behind the lease writers it reads after.
    if (group.mode === 'read') for (const stored of group.stored) tokens.set(stored, claimed?.get(stored) ?? current.get(stored)!);
    else {
      const update = claimed ? takeClaimedWriteKeys(group.keys, group.stored, claimed) : takeWriteKeys(group.keys, true);
      await bumped(runner, group, await sessionQuery<ResultHeader>(runner, update), tokens);
    }
  }
  return { taken: true, tokens };
}
