import { randomUUID } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { HeldLock, type HeldLockHost } from '../../core/held-lock.js';
import { LockStatus } from '../../core/lock-status.js';
import { LockLostError } from '../../errors/lock-lost.error.js';
import type { LockLogStore, RowLockStore, RowLockTake } from '../../store/lock-store.js';
import { LockStatementError } from '../../store/lock-statement.error.js';
import type { AttemptResult, GrantAttempt } from '../lock-strategy.js';
import { needsRarePath, takeRarely } from './rare-take.js';
import { auditRowsOf } from './terminal-rows.js';

/** What a take needs: the host its holds report to, and the stores. */
export interface TakeDeps {
  readonly host: HeldLockHost;
  readonly store: RowLockStore;
  readonly log: LockLogStore;
}

/** A row-lock has no lease: its handle's expiresAt is the latest Date there is. */
const NO_LEASE_END = new Date(8.64e15);

/**
 * The keys taken in `runner`'s transaction (its own, opened by the take, or the caller's open one),
 * with the rare paths (first use, lease holders) when met.
 */
export function takeKeys(deps: TakeDeps, runner: QueryRunner, attempt: GrantAttempt, ownTransaction: boolean): Promise<AttemptResult> {
  const acquisitionId = randomUUID();
  // Its own transaction opens with the take (the server's default isolation unless the caller
  // names one: no round trip to set it). The locking statement is the transaction's first, so
  // the work's view begins after the lock.
  const first = ownTransaction
    ? deps.store.beginAndTake(runner, attempt.targets, attempt.deadline, attempt.isolationLevel)
    : deps.store.takeJoined(runner, attempt.targets, attempt.deadline);
  // A handler, not an async frame, for the common answer (taken at once).
  const answer = (result: RowLockTake): AttemptResult => {
    // Lease holders taken over are told through their process lease; the count is not reported here.
    if (result.taken) return { lock: holdOf(deps, attempt, acquisitionId, result.tokens), reclaimed: 0 };
    if (result.why === 'rolled-back' && !ownTransaction) throw rolledBack(deps, runner, attempt, result.cause);
    // A wait cut short (or a fresh transaction rolled back: it held nothing else) is a failed try:
    // a timeout then keeps its driver error as cause.
    if (result.cause !== undefined) return { failure: LockStatementError.from(result.cause) };
    return {};
  };
  return first.then((result) =>
    needsRarePath(result)
      ? takeRarely(deps.store, deps.log, runner, { ...attempt, acquisitionId, ownTransaction }, result).then(answer)
      : answer(result),
  );
}

/**
 * A deadlock rolled back the caller's transaction, and with it every lock it held and all its
 * work so far. Its statements from now on would run in autocommit beside the next holders of its
 * keys: its session is cut, so that they fail (its holds' signals abort as their connection
 * closes) and the caller hears LockLostError, which no `onLocked: 'skip'` swallows.
 */
function rolledBack(deps: TakeDeps, runner: QueryRunner, attempt: GrantAttempt, cause: unknown): LockLostError {
  void deps.store.cutSession(runner);
  const reason = 'the database rolled back the transaction it was taken in (a deadlock): that transaction lost its locks and its work';
  return new LockLostError(attempt.targets[0]!.key, 0, reason, { cause });
}

function holdOf(deps: TakeDeps, attempt: GrantAttempt, acquisitionId: string, tokens: ReadonlyMap<string, number>): HeldLock {
  const grantedAt = performance.now();
  const rows = attempt.targets.map((t) => ({ id: '', storedKey: t.storedKey, fencingToken: tokens.get(t.storedKey) ?? 0, expiresAt: NO_LEASE_END }));
  const lock = new HeldLock(
    deps.host,
    'row-lock',
    acquisitionId,
    attempt.targets,
    rows,
    Infinity,
    grantedAt,
    grantedAt,
    grantedAt - attempt.startedAt,
    attempt.internal,
  );
  lock.commitRecord = (runner, andCommit) => {
    const audit = auditRowsOf(lock, LockStatus.RELEASED, null);
    return andCommit ? deps.store.recordAndCommit(runner, audit) : deps.store.recordInCommit(runner, audit);
  };
  return lock;
}
