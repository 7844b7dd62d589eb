import type { LockTarget } from '../core/lock-key.js';
import type { GrantOutcome } from './lock-store.js';

/** Bound on each map below (cleared when reached: forgetting only costs the log search). */
const KEYS_MAX = 10_000;

/**
 * How long a key stays known free after our release. The one-statement grants trust it without
 * searching the log: on MySQL it must end well before the janitor may prune the claims or reap the
 * key row that would refute it (CLAIMS_KEPT_MS, 10 min); on PostgreSQL a reaped key row comes back
 * at or above the fencing floor its reap raised, so only the key's token is read, never a pruned claim.
 */
export const KNOWN_FREE_FOR_MS = 60_000;

/**
 * Keys this process knows to be free without searching the log: it held the key alone and its
 * release is durable. Its own exclusive grant left no other live holder of the key (a writer is
 * granted only when none is live), and every grant of any strategy moves the key's current token
 * in the same commit as its holder's row. So while the key's current token is still that grant's,
 * nobody has held the key since, and the grant may test the token instead of searching the log for
 * live holders, which costs about a fifth of the whole grant. The current token is the key row's
 * counter on PostgreSQL, where every grant bumps it; on MySQL it is the newer of that counter and
 * the key's newest claim in the log (see currentTokenSql), since a one-INSERT grant claims its
 * token in the log and leaves the key row behind. A row-lock reader bumps nothing, but holds its
 * row lock for as long as it holds the key, and the grant's UPDATE waits for it. A key row
 * re-created after the janitor reaped it starts at or above the tokens it ever handed out, so an
 * equal token still means no grant since.
 */
export class KnownFreeKeys {
  /** Exclusive single-key grants of this process, by log row id, until their release. */
  private readonly held = new Map<string, { readonly storedKey: string; readonly token: number }>();
  /** The token a key's row has while nobody has held the key since our release, and when it was noted. */
  private readonly freeAt = new Map<string, { readonly token: number; readonly at: number }>();

  tokenOf(storedKey: string): number | undefined {
    const free = this.freeAt.get(storedKey);
    if (free === undefined || performance.now() - free.at <= KNOWN_FREE_FOR_MS) return free?.token;
    this.freeAt.delete(storedKey);
    return undefined;
  }

  /** After any grant of this process: its keys' tokens moved on; a single-key writer's is noted until its end. */
  granted(input: { readonly targets: readonly LockTarget[] }, outcome: GrantOutcome): void {
    if (!outcome.granted) return;
    for (const target of input.targets) this.freeAt.delete(target.storedKey);
    const target = input.targets[0]!;
    if (input.targets.length !== 1 || target.mode !== 'write' || target.semaphoreLimit !== undefined) return;
    const row = outcome.rows[0]!;
    if (this.held.size >= KEYS_MAX) this.held.clear();
    this.held.set(row.id, { storedKey: target.storedKey, token: row.fencingToken });
  }

  /** After a release that ended `ended` of the rows (all: each was still live and is durably ended now); returns `ended`. */
  ended(rowIds: readonly string[], ended: number): number {
    for (const id of rowIds) {
      const grant = this.held.get(id);
      if (grant === undefined) continue;
      this.held.delete(id);
      if (ended !== rowIds.length) continue;
      if (this.freeAt.size >= KEYS_MAX) this.freeAt.clear();
      this.freeAt.set(grant.storedKey, { token: grant.token, at: performance.now() });
    }
    return ended;
  }

  /** The token test failed: someone held the key since (or its row is gone). */
  forget(storedKey: string): void {
    this.freeAt.delete(storedKey);
  }
}
