import type { QueryRunner } from 'typeorm';
import type { LockTarget } from '../../core/lock-key.js';
import type { RowLockTake as TakeResult } from '../lock-store.js';
import type { ServerFlavor } from './server-flavor.js';
import { keyText, rowsOf } from './sql.js';
import { bounded, existingKeys, lockKeyRows, readTokens, takeoverStatement, takeReadKeys, takeWriteKeys } from './row-lock.sql.js';

/** Runs of same-mode keys, in the one global key order (targets come sorted), each one statement. */
function groups(targets: readonly LockTarget[]): { mode: LockTarget['mode']; keys: Buffer[]; stored: string[] }[] {
  const out: { mode: LockTarget['mode']; keys: Buffer[]; stored: string[] }[] = [];
  for (const target of targets) {
    const last = out[out.length - 1];
    if (last && last.mode === target.mode) {
      last.keys.push(target.bytes);
      last.stored.push(target.storedKey);
    } else out.push({ mode: target.mode, keys: [target.bytes], stored: [target.storedKey] });
  }
  return out;
}

/**
 * Takes the keys in the business transaction `runner` has open, waiting in the server within
 * what is left of the caller's budget. The common case is one statement for a single key. Every
 * process takes keys in the same order whatever their modes, so two multi-key requests never
 * deadlock on each other.
 * @throws the driver's error when the wait bound ran out, the statement deadlocked, or the connection broke.
 */
export async function takeKeys(
  runner: QueryRunner,
  targets: readonly LockTarget[],
  deadline: number,
  flavor: ServerFlavor,
  boundedWait = true,
): Promise<TakeResult> {
  const tokens = new Map<string, number>();
  let short: 'busy' | 'lease-holder' | undefined;
  for (const group of groups(targets)) {
    const waitMs = !boundedWait || deadline === Infinity ? Infinity : deadline - performance.now();
    const lockFirst = () => (hint: string) => lockKeyRows(group.keys, group.mode, flavor, hint);
    if (group.mode === 'write') {
      const statements = bounded(takeWriteKeys(group.keys), waitMs, flavor, lockFirst);
      let result: { affected?: number; raw?: { insertId?: number | string } } = {};
      for (const sql of statements) result = await runner.query(sql, [], true);
      if (Number(result.affected ?? 0) < group.keys.length) {
        short = 'lease-holder';
        continue;
      }
      if (group.keys.length === 1) tokens.set(group.stored[0]!, Number(result.raw?.insertId ?? 0));
      else
        for (const row of (await runner.query(readTokens(group.keys))) as Record<string, unknown>[])
          tokens.set(keyText(row.lock_key), Number(row.fencing_token));
    } else {
      const statements = bounded(takeReadKeys(group.keys, flavor), waitMs, flavor, lockFirst);
      let rows: Record<string, unknown>[] = [];
      for (const sql of statements) rows = rowsOf(await runner.query(sql));
      if (rows.length < group.keys.length || rows.some((row) => Number(row.busy) > 0)) short = 'lease-holder';
      for (const row of rows) tokens.set(keyText(row.lock_key), Number(row.fencing_token));
    }
  }
  if (!short) return { taken: true, tokens };
  const present = rowsOf(await runner.query(existingKeys(targets.map((t) => t.bytes))));
  if (present.length < targets.length) return { taken: false, why: 'missing-key-rows' };
  return { taken: false, why: short };
}

/**
 * Rare path: a lease holder of a key was live in the log. With the rows locked (waited for within
 * the budget), holders whose lease ran out are taken over; the keys are then taken again, without
 * a wait (the rows are ours). Still short: a lease holder is alive, the key is busy.
 */
export async function takeOverExpired(
  runner: QueryRunner,
  targets: readonly LockTarget[],
  deadline: number,
  flavor: ServerFlavor,
  acquisitionId: string,
): Promise<TakeResult> {
  for (const group of groups(targets)) {
    const waitMs = deadline === Infinity ? Infinity : deadline - performance.now();
    const lock = (hint: string) => lockKeyRows(group.keys, group.mode, flavor, hint);
    const sql = waitMs === Infinity ? lock('') : bounded(lock(''), waitMs, flavor, () => lock)[0]!;
    await runner.query(sql);
  }
  await runner.query(takeoverStatement(targets, acquisitionId));
  const again = await takeKeys(runner, targets, deadline, flavor, false);
  return again.taken ? again : { taken: false, why: 'busy' };
}
