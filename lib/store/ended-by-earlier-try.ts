import type { LockLogStore } from './lock-store.js';

/**
 * How many of `rowIds` this release has ended, when it was sent again after a try of unknown
 * outcome (its connection broke, its answer bound ran out): that try may have ended rows on the
 * server before its answer was lost, and the retry, queued behind it on their row locks, then
 * finds them ended. Rows carrying this release's own end (its status and note) count as ended by
 * it; a takeover (EXPIRED) or a force-release (its note) still counts as a loss.
 * @param count the rows the retry itself ended.
 */
export async function endedByThisRelease(
  log: Pick<LockLogStore, 'rowStatuses'>,
  rowIds: readonly string[],
  status: string,
  note: string | undefined,
  count: number,
): Promise<number> {
  if (count >= rowIds.length) return count;
  const rows = await log.rowStatuses(rowIds).catch(() => undefined);
  return rows ? rows.filter((row) => row.status === status && row.note === (note ?? null)).length : count;
}
