import type mysql from 'mysql2/promise';

/** One InnoDB transaction as `SHOW ENGINE INNODB STATUS` lists it. */
export interface OpenTransaction {
  /** The session (PROCESSLIST id) it belongs to. */
  readonly threadId: number;
  /** It waits for a lock now. */
  readonly lockWait: boolean;
  /** Rows it changed so far (its undo log entries). */
  readonly rowsModified: number;
  /** Its whole entry in the status text (the running statement, if any, included). */
  readonly text: string;
}

/**
 * The active InnoDB transactions of the sessions connected to `database` (the reading session
 * left out), read from `SHOW ENGINE INNODB STATUS`.
 *
 * Not from information_schema.INNODB_TRX: InnoDB serves that table from a server-wide cache that
 * it refreshes only when nobody has read it for 100 ms. Test files run side by side on one server
 * and several poll it, so a read there can list a transaction that ended seconds ago, or miss one
 * that began since. The status text is built at each call.
 */
export async function openTransactions(connection: mysql.Connection, database: string): Promise<OpenTransaction[]> {
  const [[status]] = (await connection.query('SHOW ENGINE INNODB STATUS')) as unknown as [[{ Status: string }]];
  const [sessions] = (await connection.query('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [
    database,
  ])) as unknown as [{ id: number }[]];
  const ours = new Set(sessions.map((s) => Number(s.id)));
  return parseTransactions(status.Status).filter((t) => ours.has(t.threadId));
}

/** The active transactions in a status text ("---TRANSACTION …, ACTIVE …" entries; "not started" ones are left out). */
export function parseTransactions(statusText: string): OpenTransaction[] {
  const start = statusText.indexOf('LIST OF TRANSACTIONS');
  if (start < 0) return [];
  const end = statusText.indexOf('\n--------\n', start);
  const list = statusText.slice(start, end < 0 ? undefined : end);
  const found: OpenTransaction[] = [];
  for (const entry of list.split(/^---TRANSACTION /m).slice(1)) {
    const firstLine = entry.slice(0, entry.indexOf('\n'));
    if (!/, ACTIVE\b/.test(firstLine)) continue;
    const thread = /(?:MariaDB|MySQL) thread id (\d+)/.exec(entry);
    if (!thread) continue;
    found.push({
      threadId: Number(thread[1]),
      lockWait: /^LOCK WAIT/m.test(entry),
      rowsModified: Number(/undo log entries (\d+)/.exec(entry)?.[1] ?? 0),
      text: entry,
    });
  }
  return found;
}
