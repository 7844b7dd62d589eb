/**
 * The lock designs under test, behind one interface so the uncontended and the contention sections
 * drive them alike: `hold` takes the lock, runs the critical section with the design's own way of
 * reaching the database (its connection, its transaction, or the lock's EntityManager), and lets go.
 * Each design counts the round trips it causes (client side), and declares the statements one
 * successful hold costs on the server, so the statements spent by waiters can be computed both from
 * the server's counters and from the client's.
 */
import type mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import type { LockService } from '../../../lib/index.js';
import type { ConnectionSettings } from '../../support/test-database.js';
import { hostNow } from '../stats.js';

export const DESIGN_IDS = [
  'lease',
  'lease-decorated',
  'lease-hand',
  'row-lock',
  'row-lock-hand',
  'row-lock-hand-orm',
  'row-lock-hand-no-audit',
  'row-lock-hand-pre-audit',
  'row-lock-hand-lean-audit',
  'for-update',
  'for-update-orm',
  'get-lock',
  'redlock',
  'naive-table',
] as const;
export type DesignId = (typeof DESIGN_IDS)[number];

export const DESIGN_LABELS: Record<DesignId, string> = {
  lease: 'nestjs-db-lock, lease (acquire / release)',
  'lease-decorated': 'nestjs-db-lock, lease, `@WriteLock` (critical section in the fenced transaction)',
  'lease-hand':
    "a contended lease hold's statements by hand (the doorbell wait with the grant behind it in one round trip: the log row's INSERT claiming the next token, the wait's result with that token; critical section; the log row's UPDATE with the ring in one round trip)",
  'row-lock': 'nestjs-db-lock, row-lock (`withLock`, critical section through `handle.manager`)',
  'row-lock-hand':
    "a row-lock hold's statements by hand (START and the locking UPDATE in one CALL of the begin-and-take routine; critical section; the audit row and COMMIT in one CALL of the record-and-commit routine)",
  'row-lock-hand-orm':
    "the same hold by hand with its critical section through TypeORM (a runner from the DataSource's pool; the lock's statements straight to mysql2, the critical section through `runner.manager`, as the row-lock's through `handle.manager`)",
  'row-lock-hand-no-audit':
    'the by-hand hold without its audit row (START and the locking UPDATE in one CALL of the begin-and-take routine; critical section; COMMIT): what the audit row inside the hold costs',
  'row-lock-hand-pre-audit': 'the by-hand hold with its audit row inserted before the locking UPDATE, its token filled in before COMMIT',
  'row-lock-hand-lean-audit':
    "the by-hand hold with its audit row in a table whose only index is its primary key (the same CALLs; the record-and-commit routine's INSERT into that table)",
  'for-update': 'bare blocking `SELECT … FOR UPDATE` (critical section in its transaction)',
  'for-update-orm':
    'bare blocking `SELECT … FOR UPDATE` as a TypeORM app writes it (`dataSource.transaction`, the lock and the critical section through its EntityManager)',
  'get-lock': 'bare blocking `GET_LOCK`',
  redlock: 'node-redlock (local Redis)',
  'naive-table': 'naive table lock (INSERT/DELETE, 50 ms retry)',
};

export const SHORT_LABELS: Record<DesignId, string> = {
  lease: 'lease',
  'lease-decorated': 'lease @WriteLock',
  'lease-hand': 'lease by hand',
  'row-lock': 'row-lock',
  'row-lock-hand': 'row-lock by hand',
  'row-lock-hand-orm': 'row-lock by hand, TypeORM work',
  'row-lock-hand-no-audit': 'row-lock by hand, no audit row',
  'row-lock-hand-pre-audit': 'row-lock by hand, audit row first',
  'row-lock-hand-lean-audit': 'row-lock by hand, lean audit row',
  'for-update': 'FOR UPDATE',
  'for-update-orm': 'FOR UPDATE, TypeORM',
  'get-lock': 'GET_LOCK',
  redlock: 'redlock',
  'naive-table': 'naive table',
};

/** One statement on whatever the design runs its critical section with; resolves to the rows. */
export type Query = (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

/** The critical section. */
export type Body = (query: Query) => Promise<void>;

/** When the caller held the lock, and when it began to let go (the critical section was done). */
export interface HoldTimes {
  acquiredAt: number;
  releasingAt: number;
}

export interface LockDesign {
  readonly id: DesignId;
  /**
   * Database statements of one successful hold as the server counts them ('Questions': every
   * statement of a multi-statement round trip), the critical section's two included.
   */
  readonly usefulStatements: number;
  /** Redis commands of one successful hold. */
  readonly usefulRedisCommands: number;
  /**
   * Round trips a hold makes under contention that an uncontended hold does not, and which are
   * part of the handoff rather than waiting (a doorbell rung in a round trip of its own).
   */
  readonly handoffRoundTrips: number;
  /** Creates what the key needs before the first hold (rows to lock). */
  prepare(key: string): Promise<void>;
  /** Takes the lock on `key` as caller `slot`, runs `body` in it, lets go. */
  hold(key: string, slot: number, body: Body): Promise<HoldTimes>;
  /** Round trips sent since creation (client count: failed tries, waits and the critical section included). */
  roundTrips(): number;
  redisCommands(): number;
  /** Tries that failed outright and were started again by the caller (redlock's LockError). */
  readonly gaveUp: number;
  close(): Promise<void>;
}

/** What designs are built from, in the bench's process or in a worker. */
export interface DesignDeps {
  readonly locks: LockService;
  readonly dataSource: DataSource;
  readonly settings: ConnectionSettings;
  /** One connection per caller slot, shared by the designs that bring their own (they run one at a time). */
  readonly slots: SlotConnections;
  readonly redisUrl: string;
  /** Names this process in the naive lock table. */
  readonly holder: string;
  /** Statements sent through the DataSource (TypeORM) so far in this process. */
  readonly dataSourceQueries: () => number;
}

/** Bench tables beside the lock tables: counters and the rows the bare FOR UPDATE lock locks. */
export const BENCH_SCHEMA = [
  `CREATE TABLE bench_counter (id INT PRIMARY KEY, v BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`,
  `INSERT INTO bench_counter (id, v) VALUES (1, 0), (2, 0), (3, 0), (4, 0)`,
  `CREATE TABLE bench_row_lock (k VARCHAR(191) PRIMARY KEY) ENGINE=InnoDB`,
  `CREATE TABLE bench_naive_lock (lock_name VARCHAR(191) PRIMARY KEY, holder VARCHAR(64) NOT NULL) ENGINE=InnoDB`,
];

/** Connections per caller slot, opened on first use; every statement sent through them is counted by the caller. */
export class SlotConnections {
  private readonly connections = new Map<number, Promise<mysql.Connection>>();
  constructor(private readonly open: () => Promise<mysql.Connection>) {}

  get(slot: number): Promise<mysql.Connection> {
    let connection = this.connections.get(slot);
    if (!connection) {
      connection = this.open();
      this.connections.set(slot, connection);
    }
    return connection;
  }

  async close(): Promise<void> {
    for (const connection of this.connections.values()) await (await connection).end().catch(() => undefined);
    this.connections.clear();
  }
}

/** A Query on a plain connection that counts its round trips into `counter`. */
export function countedQuery(connection: mysql.Connection, counter: { sent: number }): Query {
  return async (sql, params) => {
    counter.sent++;
    const [rows] = await connection.query(sql, params);
    return rows as Record<string, unknown>[];
  };
}

/** Runs the critical section with the lock held, noting when it began and ended, then lets go (also when it failed). */
export async function timedHold(body: () => Promise<void>, letGo: () => Promise<unknown>): Promise<HoldTimes> {
  const acquiredAt = hostNow();
  let releasingAt = acquiredAt;
  try {
    await body();
  } finally {
    releasingAt = hostNow();
    await letGo();
  }
  return { acquiredAt, releasingAt };
}
