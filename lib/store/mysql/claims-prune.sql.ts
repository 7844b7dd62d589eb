import { affectedRowsOf, format, LOCK_LOG_TABLE, LOCK_TABLE, rowsOf } from './sql.js';
import type { StatementPlan } from './statement-plan.js';
import { prunableCondition } from './janitor.sql.js';

/** A batch of prunable rows, and which of their keys' rows this transaction could lock. */
export interface ClaimsPruneBatch {
  readonly rows: readonly { id: string; key: Buffer; claim: number | null }[];
  /** Keys (hex) whose key row is locked by this transaction; a key row someone holds is skipped. */
  readonly locked: ReadonlySet<string>;
  /** Keys (hex) that have a key row (the others were reaped, the fencing floor raised above their claims then). */
  readonly existing: ReadonlySet<string>;
}

/**
 * The prune where tokens are claimed, first round trip (see claimsPruneEndPlan for the second). A
 * key row may lag behind the key's claims (one-INSERT grants never write it): before claims go, it
 * is lifted above them, or a later grant could hand out a token again. So this opens the
 * transaction, reads the batch, and locks the key rows of its claimed rows, skipping any someone
 * has locked right now (SKIP LOCKED: a row-lock holder keeps its key row locked for its whole
 * hold, and the janitor never waits on a holder; those keys' claims stay for a later run).
 */
export function claimsPruneBatchPlan(retentionMs: number, batchSize: number, below?: string): StatementPlan<ClaimsPruneBatch> {
  const prunable = prunableCondition(retentionMs, true, below);
  const claimedKeys = format(
    `lock_key IN (SELECT lock_key FROM (SELECT lock_key FROM ${LOCK_LOG_TABLE} WHERE ${prunable} AND token_claim IS NOT NULL ORDER BY id LIMIT ?) AS batch)`,
    [batchSize],
  );
  return {
    statements: [
      'START TRANSACTION',
      format(`SELECT id, lock_key, token_claim FROM ${LOCK_LOG_TABLE} WHERE ${prunable} ORDER BY id LIMIT ?`, [batchSize]),
      `SELECT lock_key FROM ${LOCK_TABLE} WHERE ${claimedKeys}`,
      `SELECT lock_key FROM ${LOCK_TABLE} WHERE ${claimedKeys} FOR UPDATE SKIP LOCKED`,
    ],
    parse: (results) => ({
      rows: rowsOf(results[1]).map((r) => ({
        id: String(r.id),
        key: r.lock_key as Buffer,
        claim: r.token_claim === null || r.token_claim === undefined ? null : Number(r.token_claim),
      })),
      existing: new Set(rowsOf(results[2]).map((r) => (r.lock_key as Buffer).toString('hex'))),
      locked: new Set(rowsOf(results[3]).map((r) => (r.lock_key as Buffer).toString('hex'))),
    }),
  };
}

/**
 * The second round trip: each locked key row lifted to the highest claim of its rows in the batch
 * (by primary key, already locked: no wait), then the batch's rows deleted by id: unclaimed rows,
 * claims of lifted keys, and claims of keys with no key row (reaped: the fencing floor was raised
 * above their claims then, and a new key row starts from it); the claims of skipped keys stay for a
 * later run. COMMIT. Answers how many rows it deleted.
 */
export function claimsPruneEndPlan(batch: ClaimsPruneBatch): StatementPlan<number> {
  const highest = new Map<string, { key: Buffer; claim: number }>();
  const ids: string[] = [];
  for (const row of batch.rows) {
    if (row.claim === null) {
      ids.push(row.id);
      continue;
    }
    const hex = row.key.toString('hex');
    if (!batch.locked.has(hex)) {
      if (!batch.existing.has(hex)) ids.push(row.id);
      continue;
    }
    ids.push(row.id);
    if (row.claim > (highest.get(hex)?.claim ?? -Infinity)) highest.set(hex, { key: row.key, claim: row.claim });
  }
  const lifts = [...highest.values()].map(({ key, claim }) =>
    format(`UPDATE ${LOCK_TABLE} SET fencing_token = GREATEST(fencing_token, ?) WHERE lock_key = ?`, [claim, key]),
  );
  const remove = ids.length === 0 ? [] : [format(`DELETE FROM ${LOCK_LOG_TABLE} WHERE id IN (?)`, [ids])];
  return {
    statements: [...lifts, ...remove, 'COMMIT'],
    parse: (results) => (remove.length === 0 ? 0 : affectedRowsOf(results[lifts.length])),
  };
}
