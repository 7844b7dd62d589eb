import type { HeldLock } from '../core/held-lock.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import { LockStatus } from '../core/lock-status.js';
import type { LockLogStore } from '../store/lock-store.js';

/**
 * The LockLostError for a lock whose rows someone else ended before its holder did: it names the
 * key and what happened (taken over after its lease ran out, reclaimed, force-released).
 */
export async function explainLoss(log: LockLogStore, lock: HeldLock): Promise<LockLostError> {
  const rows = await log.rowStatuses(lock.rowIds).catch(() => []);
  const gone =
    rows.find((r) => r.status === LockStatus.EXPIRED) ??
    rows.find((r) => r.note !== null && r.status !== LockStatus.ACQUIRED && r.status !== LockStatus.COMPLETED) ??
    rows[0];
  const key = lock.targets.find((t) => t.storedKey === gone?.storedKey)?.key ?? lock.keys[0]!;
  const reason =
    gone?.status === LockStatus.EXPIRED
      ? `its lease ran out and it was ${gone.note ?? 'taken over'}; the new holder was not touched`
      : `it was ended before release (status ${gone?.status ?? 'unknown'}${gone?.note ? `: ${gone.note}` : ''})`;
  return new LockLostError(key, lock.tokenOf(key), reason);
}
