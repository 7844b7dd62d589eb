import type { TestDatabase } from '../support/test-database.js';
import type { LockWorker } from '../support/worker-host.js';

/** A worker as the attacks see it. Observers are never paused, blocked or killed: their timeouts are judged. */
export interface AttackTarget {
  index: number;
  worker: LockWorker;
  observer: boolean;
  paused: boolean;
}

export interface AttackContext {
  db: TestDatabase;
  plan: { leaseMs: number };
  relaunch(index: number): Promise<void>;
  live: Map<number, AttackTarget>;
}

const SCENARIO = new URL('./scenario.js', import.meta.url).href;

function victim(context: AttackContext): AttackTarget | undefined {
  const candidates = [...context.live.values()].filter((t) => !t.observer && !t.paused && !t.worker.exited);
  return candidates[Math.floor(Math.random() * candidates.length)];
}

async function randomSession(db: TestDatabase, where = ''): Promise<number | undefined> {
  const rows = await db.query<{ id: number }[]>(
    `SELECT id FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID() ${where} ORDER BY RAND() LIMIT 1`,
    [db.name],
  );
  return rows[0] ? Number(rows[0].id) : undefined;
}

/** Each attack returns whether it found something to attack. */
export const ATTACKS = {
  /** A holder's process dies mid-business (its locks come back after their lease, or at once for row-locks). */
  async sigkill(context: AttackContext): Promise<boolean> {
    const target = victim(context);
    if (!target) return false;
    context.live.delete(target.index);
    await target.worker.kill();
    await context.relaunch(target.index);
    return true;
  },
  /** A process frozen past its lease (GC pause, SIGSTOP), then resumed: its late commits must be refused. */
  async sigstop(context: AttackContext): Promise<boolean> {
    const target = victim(context);
    if (!target) return false;
    target.paused = true;
    target.worker.signal('SIGSTOP');
    setTimeout(
      () => {
        target.worker.signal('SIGCONT');
        target.paused = false;
      },
      context.plan.leaseMs * (1.2 + Math.random()),
    );
    return true;
  },
  /** The event loop blocked past the lease: the watchdog cannot renew. */
  async 'block-loop'(context: AttackContext): Promise<boolean> {
    const target = victim(context);
    if (!target) return false;
    void target.worker.run(SCENARIO, 'blockEventLoop', { ms: context.plan.leaseMs * 1.3 }).catch(() => undefined);
    return true;
  },
  /** Any connection of the database dies: a business one, a renewal one, a lock-pool one, a row-lock holder's. */
  async 'kill-connection'(context: AttackContext): Promise<boolean> {
    const id = await randomSession(context.db);
    if (id === undefined) return false;
    await context.db.query(`KILL CONNECTION ${id}`).catch(() => undefined);
    return true;
  },
  /** A lock statement interrupted in flight (a grant, a release, a renewal, a row lock being waited for). */
  async 'kill-query'(context: AttackContext): Promise<boolean> {
    const id = await randomSession(context.db, "AND info LIKE '%db_lock%'");
    if (id === undefined) return false;
    await context.db.query(`KILL QUERY ${id}`).catch(() => undefined);
    return true;
  },
} satisfies Record<string, (context: AttackContext) => Promise<boolean>>;

export type Attack = keyof typeof ATTACKS;
export const ALL_ATTACKS = Object.keys(ATTACKS) as Attack[];
