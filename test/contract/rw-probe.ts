import type { TestDatabase } from '../support/test-database.js';

/** The probe row the scenarios update inside their critical sections (see scenarios/read-write.ts). */
export interface ProbeRow {
  readers: number;
  writers: number;
  max_readers: number;
  reader_entries: number;
  reader_sum: number;
  writer_entries: number;
  violations: number;
}

export async function probe(db: TestDatabase, id: number): Promise<ProbeRow> {
  const [row] = await db.query<Record<string, unknown>[]>('SELECT * FROM rw_probe WHERE id = ?', [id]);
  return Object.fromEntries(Object.entries(row!).map(([k, v]) => [k, Number(v)])) as unknown as ProbeRow;
}

export interface HoldInterval {
  mode: 'read' | 'write';
  holder: string;
  owner: string;
  status: string;
  fencingToken: number;
  /** Server time in µs since 2000-01-01 (exact: timestamp arithmetic on the server). */
  start: number;
  end: number;
}

/** Every hold of `storedKey` as a server-clock interval [acquired_at, ended_at], by start. */
export async function holdIntervals(db: TestDatabase, storedKey: string): Promise<HoldInterval[]> {
  const rows = await db.query<Record<string, unknown>[]>(
    `SELECT g.mode, g.holder, g.owner, g.status, g.fencing_token, ${db.sql.micros('g.acquired_at')} AS s, ` +
      `${db.sql.micros(`COALESCE(g.ended_at, ${db.sql.leaseEndsAt('g', 'p')})`)} AS e ` +
      `FROM db_lock_log g LEFT JOIN db_lock_process p ON p.id = g.process_id WHERE g.lock_key = ? ORDER BY s, g.id`,
    [Buffer.from(storedKey)],
  );
  return rows.map((r) => ({
    mode: r.mode as 'read' | 'write',
    holder: String(r.holder),
    owner: String(r.owner),
    status: String(r.status),
    fencingToken: Number(r.fencing_token),
    start: Number(r.s),
    end: Number(r.e),
  }));
}

/**
 * Second, independent overlap detector on the log rows: a write hold overlapping any other hold
 * is a violation; read holds of different processes overlapping is the sharing we want to see.
 */
export function analyseIntervals(intervals: readonly HoldInterval[]): { writeOverlaps: number; crossProcessReadOverlaps: number } {
  let writeOverlaps = 0;
  let crossProcessReadOverlaps = 0;
  let maxEndAll = -Infinity;
  let maxEndWrite = -Infinity;
  let maxEndRead = -Infinity;
  let maxEndReadHolder = '';
  for (const hold of intervals) {
    if (hold.start < maxEndWrite || (hold.mode === 'write' && hold.start < maxEndAll)) writeOverlaps++;
    if (hold.mode === 'read' && hold.start < maxEndRead && hold.holder !== maxEndReadHolder) crossProcessReadOverlaps++;
    maxEndAll = Math.max(maxEndAll, hold.end);
    if (hold.mode === 'write') maxEndWrite = Math.max(maxEndWrite, hold.end);
    else if (hold.end > maxEndRead) {
      maxEndRead = hold.end;
      maxEndReadHolder = hold.holder;
    }
  }
  return { writeOverlaps, crossProcessReadOverlaps };
}

/** p50/p99/max of a list of durations (ms), rounded. */
export function summarise(values: readonly number[]): { count: number; p50: number; p99: number; max: number; mean: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : 0);
  const round = (x: number): number => Math.round(x * 10) / 10;
  return {
    count: sorted.length,
    p50: round(at(0.5)),
    p99: round(at(0.99)),
    max: round(sorted.at(-1) ?? 0),
    mean: round(sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1)),
  };
}
