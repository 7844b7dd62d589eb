import type { Logger } from '@nestjs/common';
import type { HeldLock } from '../../core/held-lock.js';
import type { RowLockAuditRow as AuditRow } from '../../store/lock-store.js';

/** Most rows one insert carries. */
const ROWS_PER_INSERT = 500;

/**
 * Audit rows of holds that did not commit (rolled back, abandoned, connection lost): their rows
 * went with the rollback, so they are written after it, on the library's pool, batched and off
 * the caller's path. Best effort: a process that dies first leaves no row at all.
 */
export class TerminalRows {
  private pending: AuditRow[] = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly write: (rows: readonly AuditRow[]) => Promise<void>,
    private readonly logger: Pick<Logger, 'warn'>,
  ) {}

  add(rows: readonly AuditRow[]): void {
    this.pending.push(...rows);
    this.flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.flush());
  }

  /** Writes what is pending now (shutdown waits for it). */
  async settle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, ROWS_PER_INSERT);
        try {
          await this.write(batch);
        } catch (error) {
          this.logger.warn(`Could not write ${batch.length} row-lock audit row(s) of holds that did not commit: ${String(error)}`);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }
}

/** A hold's audit rows, one per key, ended now with `status` (hold time measured by the holder). */
export function auditRowsOf(lock: HeldLock, status: AuditRow['status'], note: string | null): AuditRow[] {
  const holdMs = performance.now() - lock.grantedAt;
  return lock.targets.map((t) => ({
    key: t.bytes,
    mode: t.mode,
    owner: lock.acquisitionId,
    fencingToken: lock.tokenOf(t.key),
    status,
    waitedMs: lock.waitedMs,
    holdMs,
    note: note === null ? null : note.slice(0, 255),
  }));
}
