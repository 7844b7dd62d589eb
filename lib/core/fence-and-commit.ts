import type { QueryRunner } from 'typeorm';
import { LockLostError } from '../errors/lock-lost.error.js';
import { toTypedError } from '../errors/to-typed-error.js';
import type { FenceStore } from '../store/lock-store.js';
import { LockStatementError } from '../store/lock-statement.error.js';
import type { HeldLock } from './held-lock.js';

/** What a fence that found fewer live rows than the lock holds tells the caller. */
const TAKEN_OVER = 'its lease ran out and another holder took the key over before this transaction could commit; it was rolled back';

/**
 * The fence, then COMMIT, of a fenced transaction (see FencedTransaction): the locks `ending` here
 * are ended in the commit, those `kept` by outer calls are written (COMPLETED), row-lock holds
 * write their audit rows. Throws LockLostError if any lock is no longer ours; the caller rolls
 * back. The commonest shapes, one lock ending here and nothing else, go as one statement that ends
 * the hold and commits where the store can (FenceStore.endAndCommit for a lease lock of one row,
 * RowLockStore.recordAndCommit for a row-lock hold).
 */
export function fenceAndCommit(store: FenceStore, runner: QueryRunner, ending: readonly HeldLock[], kept: readonly HeldLock[]): Promise<void> {
  const alone = ending.length === 1 && kept.length === 0 ? ending[0]! : undefined;
  if (alone?.liveNow && (alone.commitRecord || alone.rowIds.length === 1)) return endAlone(store, runner, alone);
  return fenceAndCommitAll(store, runner, ending, kept);
}

/**
 * The commonest shapes, one live lock ending here and nothing else, in one statement that ends the
 * hold and commits where the store can: handlers instead of an async frame, as this runs on every
 * fenced call.
 */
function endAlone(store: FenceStore, runner: QueryRunner, lock: HeldLock): Promise<void> {
  lock.fencesInProgress++;
  const committed = lock.commitRecord
    ? committing(lock, () => lock.commitRecord!(runner, true)).then(() => true)
    : committing(lock, () => store.endAndCommit(runner, lock.rowIds[0]!, lock.acquisitionId));
  return committed.then(
    (ended) => {
      lock.fencesInProgress--;
      if (!ended) throw new LockLostError(lock.keys[0]!, lock.fencingToken, TAKEN_OVER);
    },
    (error: unknown) => {
      lock.fencesInProgress--;
      throw error;
    },
  );
}

async function fenceAndCommitAll(store: FenceStore, runner: QueryRunner, ending: readonly HeldLock[], kept: readonly HeldLock[]): Promise<void> {
  const all = [...ending, ...kept];
  // Known lost (taken over, lease ran out unconfirmed, maxHoldMs): never commit on it. Checked
  // before the fence counts as in progress, as in endAlone: the watchdog spares a lock being fenced.
  for (const lock of all) if (!lock.liveNow) throw lostReason(lock, `it was already ${lock.state} before the commit`);
  for (const lock of all) lock.fencesInProgress++;
  try {
    await fence(
      ending.filter((lock) => !lock.commitRecord),
      (lock) => store.endInCommit(runner, lock.rowIds, lock.acquisitionId),
    );
    await record(
      runner,
      ending.filter((lock) => lock.commitRecord),
    );
    // A row-lock kept by an outer call has no log row: its own open transaction is its fence.
    await fence(
      kept.filter((lock) => lock.rowIds.length > 0),
      (lock) => store.fenceKept(runner, lock.rowIds, lock.acquisitionId),
    );
    await committing(all[0]!, () => store.commit(runner));
  } finally {
    for (const lock of all) lock.fencesInProgress--;
  }
}

/** COMMIT (or the statement that commits), its failures typed. */
function committing<T>(lock: HeldLock, commit: () => Promise<T>): Promise<T> {
  let sent: Promise<T>;
  try {
    sent = commit();
  } catch (error) {
    return Promise.reject(commitFailure(lock, error));
  }
  return sent.then(undefined, (error: unknown) => {
    throw commitFailure(lock, error);
  });
}

/** A failed COMMIT (or statement that commits), typed. */
function commitFailure(lock: HeldLock, error: unknown): Error {
  // A Galera certification failure at COMMIT, or a deadlock or lock wait of a statement sent with
  // it: a conflicting write to our rows (a takeover, a holder on another node) won, and nothing of ours committed.
  // Anything else: the commit's outcome is not known.
  const kind = LockStatementError.from(error).kind;
  if (kind === 'retry')
    return new LockLostError(
      lock.keys[0]!,
      lock.fencingToken,
      'the commit failed: a conflicting transaction on its rows won first; nothing was committed',
      {
        cause: error,
      },
    );
  // The server refused the statement: its COMMIT (or the routine's, which an error stops first) did not
  // happen. A broken connection, or a statement interrupted mid-way, leaves the outcome unknown.
  const known = kind !== 'connection-lost' && kind !== 'deadline' && kind !== 'unreachable' && kind !== 'interrupted';
  return toTypedError(
    error,
    `The fenced COMMIT failed; ${known ? 'the server refused it, so nothing was committed' : 'whether the transaction committed is unknown'}`,
  );
}

async function fence(locks: readonly HeldLock[], write: (lock: HeldLock) => Promise<number>): Promise<void> {
  for (const lock of locks) {
    let written: number;
    try {
      written = await write(lock);
    } catch (error) {
      if (LockStatementError.from(error).kind === 'retry')
        throw new LockLostError(lock.keys[0]!, lock.fencingToken, 'the fence could not write its rows (a conflicting transaction won)', {
          cause: error,
        });
      throw toTypedError(error, 'The fence could not run');
    }
    if (written < lock.rowIds.length) throw new LockLostError(lock.keys[0]!, lock.fencingToken, TAKEN_OVER);
  }
}

/**
 * Row-lock holds ending here: their audit rows go into this commit. No fence is needed: nobody
 * can take a row lock this transaction holds, and if its connection died the COMMIT fails.
 */
async function record(runner: QueryRunner, locks: readonly HeldLock[]): Promise<void> {
  for (const lock of locks) {
    try {
      await lock.commitRecord!(runner, false);
    } catch (error) {
      // On a multi-primary cluster a holder on another node can win the key row: its replicated
      // write aborts this transaction mid-way (1213), and this hold's work is rolled back.
      if (LockStatementError.from(error).kind === 'retry')
        throw new LockLostError(lock.keys[0]!, lock.fencingToken, 'a conflicting transaction won the key row; this one was rolled back', {
          cause: error,
        });
      throw toTypedError(error, 'The audit rows of a row-lock could not be written');
    }
  }
}

function lostReason(lock: HeldLock, fallback: string): LockLostError {
  const reason: unknown = lock.signal.reason;
  return reason instanceof LockLostError ? reason : new LockLostError(lock.keys[0]!, lock.fencingToken, fallback, { cause: reason });
}
