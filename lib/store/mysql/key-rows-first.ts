import type { LockTarget } from '../../core/lock-key.js';
import { format, keyText, LOCK_TABLE, type Row, rowsOf } from './sql.js';
import type { StatementPlan } from './statement-plan.js';
import { KEY_ROWS_ANSWER_MS } from '../answer-bound.js';

/** Most keys remembered as having rows; past it the memory starts again (a forgotten key costs one read). */
const MOST_REMEMBERED = 10_000;
/**
 * The time the creation may take, ms: at least a round trip's (a single try has no budget), at most
 * a second of the caller's budget. Past it (another transaction's gap lock holds the insert) the take
 * goes on as without it, with what is left of the budget: the database then sees any deadlock.
 */
const CREATE_WITHIN_MS = { least: KEY_ROWS_ANSWER_MS, most: 1_000 };

/**
 * Key rows created before a take inside a transaction the take cannot roll back (a joined one).
 *
 * A locking statement on a missing row takes a gap lock at REPEATABLE READ, and the rows must then
 * be created inside that transaction: two such transactions, each creating a key in the same gap,
 * wait for each other's gap lock, and the database rolls one back whole. So keys this process has
 * not yet seen with a row are looked up first, and the missing ones created in their own committed
 * statement, both on the library's pool, before any lock is taken. Not read in the joined
 * transaction: a plain read there would fix its REPEATABLE READ snapshot before the key is taken,
 * and the nested work would read what the key guards as it was before the previous holder's commit.
 * A row reaped since it was seen, or a creation that failed, leaves the take to create it inside.
 */
export class KeyRowsFirst {
  private readonly seen = new Set<string>();

  constructor(
    private readonly read: (plan: StatementPlan<Row[]>, deadline?: number) => Promise<Row[]>,
    private readonly create: (keys: readonly Buffer[], deadline?: number) => Promise<void>,
  ) {}

  async ensure(targets: readonly LockTarget[], deadline: number): Promise<void> {
    const unseen = targets.filter((t) => !this.seen.has(t.storedKey));
    if (unseen.length === 0) return;
    const now = performance.now();
    const by = Math.max(now + CREATE_WITHIN_MS.least, Math.min(deadline, now + CREATE_WITHIN_MS.most));
    const plan: StatementPlan<Row[]> = {
      statements: [format(`SELECT lock_key FROM ${LOCK_TABLE} WHERE lock_key IN (?)`, [unseen.map((t) => t.bytes)])],
      parse: ([rows]) => rowsOf(rows),
    };
    try {
      const present = new Set((await this.read(plan, by)).map((row) => keyText(row.lock_key)));
      const missing = unseen.filter((t) => !present.has(t.storedKey));
      if (missing.length > 0)
        await this.create(
          missing.map((t) => t.bytes),
          by,
        );
    } catch {
      return; // the take creates them inside, as it would have
    }
    if (this.seen.size + unseen.length > MOST_REMEMBERED) this.seen.clear();
    for (const target of unseen) this.seen.add(target.storedKey);
  }
}
