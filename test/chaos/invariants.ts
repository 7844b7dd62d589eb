import type { TestDatabase } from '../support/test-database.js';
import { sessionsLeft } from '../support/session-count.js';

/**
 * The chaos suite's verdict, from the database alone (the audit rows' server timestamps, the
 * counters, the lock tables, the server's own views): nothing here trusts the library.
 */
export interface Verdict {
  /** Committed fenced sections, and signal sections that kept an unaborted signal to their end. */
  claims: number;
  /** Two claims of one key overlapping in server time. */
  overlaps: string[];
  /** Counter value differing from its committed sections. */
  lostUpdates: number;
  /**
   * A committed claim whose token is not greater than the previous committed claim's on that key.
   * A row-lock hold that rolled back never committed its token, which the next holder receives
   * again; its claim still counts for overlaps.
   */
  tokenOrder: string[];
  /** Claims of row-lock holds that rolled back after the section (their token may be handed out again). */
  uncommittedClaims: number;
  /** Sections that ended with an aborted signal (they knew they had lost the lock). */
  abortedSections: number;
  /** Per key: counter vs committed sections, where they differ. */
  counterMismatches: string[];
}

interface AuditRow {
  k: string;
  style: string;
  strategy: string;
  token: number;
  entered: number;
  exited: number;
  aborted: number;
  pid: number;
  committed: number;
}

export async function checkSections(db: TestDatabase): Promise<Verdict> {
  const rows = await db.query<AuditRow[]>(
    'SELECT k, style, strategy, token, pid, aborted, ' +
      "(style = 'fenced' OR section IS NULL OR EXISTS (SELECT 1 FROM chaos_commit c WHERE c.section = chaos_audit.section)) AS committed, " +
      'TIMESTAMPDIFF(MICROSECOND, "2000-01-01", entered_at) AS entered, TIMESTAMPDIFF(MICROSECOND, "2000-01-01", exited_at) AS exited ' +
      'FROM chaos_audit ORDER BY k, entered_at, id',
  );
  const verdict: Verdict = {
    claims: 0,
    overlaps: [],
    lostUpdates: 0,
    tokenOrder: [],
    uncommittedClaims: 0,
    abortedSections: 0,
    counterMismatches: [],
  };
  let previous: AuditRow | undefined;
  let previousCommitted: AuditRow | undefined;
  let latestExit: AuditRow | undefined;
  for (const raw of rows) {
    const row = {
      ...raw,
      token: Number(raw.token),
      entered: Number(raw.entered),
      exited: Number(raw.exited),
      aborted: Number(raw.aborted),
      committed: Number(raw.committed),
    };
    if (row.aborted) {
      verdict.abortedSections++;
      continue;
    }
    verdict.claims++;
    if (previous?.k !== row.k) latestExit = undefined;
    if (latestExit && latestExit.exited > row.entered)
      verdict.overlaps.push(
        `${row.k}: ${row.style} ${row.strategy} token ${row.token} (pid ${row.pid}) entered ${(latestExit.exited - row.entered) / 1000} ms before ` +
          `${latestExit.style} ${latestExit.strategy} token ${latestExit.token} (pid ${latestExit.pid}) exited`,
      );
    if (!row.committed) verdict.uncommittedClaims++;
    else {
      if (previousCommitted?.k === row.k && row.token !== 0 && row.token <= previousCommitted.token)
        verdict.tokenOrder.push(`${row.k}: token ${row.token} after token ${previousCommitted.token}`);
      previousCommitted = row;
    }
    if (!latestExit || row.exited > latestExit.exited) latestExit = row;
    previous = row;
  }
  const counters = await db.query<{ k: string; n: number; committed: number }[]>(
    "SELECT c.k, c.n, (SELECT COUNT(*) FROM chaos_audit a WHERE a.k = c.k AND a.style = 'fenced') AS committed FROM chaos_counter c",
  );
  for (const c of counters) {
    verdict.lostUpdates += Math.abs(Number(c.committed) - Number(c.n));
    if (Number(c.committed) !== Number(c.n)) verdict.counterMismatches.push(`${c.k}: counter ${c.n}, committed sections ${c.committed}`);
  }
  return verdict;
}

export interface Leftovers {
  liveLogRows: number;
  /** Connections to the test database other than the checker's own. */
  connections: number;
  /** Open InnoDB transactions of sessions on the test database. */
  openTransactions: number;
  lockRows: number;
  processRows: number;
  logRows: number;
}

export async function checkLeftovers(db: TestDatabase): Promise<Leftovers> {
  const one = async (sql: string, params: unknown[] = []): Promise<number> => Number((await db.query<{ n: number }[]>(sql, params))[0]!.n);
  return {
    liveLogRows: await one("SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED')"),
    // Read until none is left, up to 3 s: the server drops a closed connection's thread a moment after the client's QUIT.
    connections: (await sessionsLeft(db, 3_000)).length,
    openTransactions: (await db.openTransactions()).length,
    lockRows: await one('SELECT COUNT(*) AS n FROM db_lock'),
    processRows: await one('SELECT COUNT(*) AS n FROM db_lock_process'),
    logRows: await one('SELECT COUNT(*) AS n FROM db_lock_log'),
  };
}

/** Every violation as one line; empty when the run held. */
export function violations(verdict: Verdict, leftovers: Leftovers, expectedKeys: number): string[] {
  const out = [...verdict.overlaps.slice(0, 10), ...verdict.tokenOrder.slice(0, 10)];
  if (verdict.overlaps.length > 10) out.push(`... ${verdict.overlaps.length} overlaps in all`);
  if (verdict.lostUpdates > 0) out.push(`${verdict.lostUpdates} lost updates (${verdict.counterMismatches.join('; ')})`);
  if (leftovers.liveLogRows > 0) out.push(`${leftovers.liveLogRows} log rows still live after the clean-up`);
  if (leftovers.connections > 0) out.push(`${leftovers.connections} connections left open`);
  if (leftovers.openTransactions > 0) out.push(`${leftovers.openTransactions} transactions left open`);
  // One row per key, plus the janitor's own key and the fencing floor.
  if (leftovers.lockRows > expectedKeys + 2) out.push(`${leftovers.lockRows} lock rows for ${expectedKeys} keys`);
  return out;
}

/**
 * What a report needs to explain an overlap after the databases are gone: the key's audit rows
 * and log rows within 5 s of the first overlap (server times), and the attacks made (client UTC).
 */
export async function overlapEvidence(db: TestDatabase, overlap: string, attackLog: readonly string[]): Promise<string[]> {
  const key = overlap.split(':')[0]!;
  const [first] = await db.query<{ at: string }[]>(
    "SELECT DATE_FORMAT(MIN(entered_at), '%Y-%m-%d %H:%i:%s.%f') AS at FROM chaos_audit WHERE k = ? AND aborted = 0 AND token = ?",
    [key, Number(/token (\d+)/.exec(overlap)?.[1] ?? -1)],
  );
  const around = 'BETWEEN ? - INTERVAL 5 SECOND AND ? + INTERVAL 5 SECOND';
  const at = first?.at ?? null;
  const audit = await db.query<Record<string, unknown>[]>(
    `SELECT style, strategy, pid, token, aborted, entered_at, exited_at, section IS NULL OR EXISTS (SELECT 1 FROM chaos_commit c WHERE c.section = a.section) AS committed FROM chaos_audit a WHERE k = ? AND entered_at ${around} ORDER BY entered_at`,
    [key, at, at],
  );
  const log = await db.query<Record<string, unknown>[]>(
    `SELECT id, strategy, mode, fencing_token, status, acquired_at, ended_at, note FROM db_lock_log WHERE lock_key = ? AND acquired_at ${around} ORDER BY id`,
    [Buffer.from(key), at, at],
  );
  return [
    `overlap on ${key} near ${at}`,
    ...audit.map((r) => `audit ${JSON.stringify(r)}`),
    ...log.map((r) => `log ${JSON.stringify(r)}`),
    `attacks: ${attackLog.join(', ')}`,
  ];
}
