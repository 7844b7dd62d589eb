/**
 * The lock designs under test, behind one small interface so the uncontended and the contention
 * sections drive them the same way. Each reports the database statements (what SHOW GLOBAL STATUS
 * 'Questions' counts: every statement of a multi-statement round trip) that one successful
 * acquire + release costs, and counts every statement it sends, so the statements spent by
 * waiters can be computed both from the server's counters and from the client side.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import type { LockService } from '../../lib/index.js';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { leanGrantPlan } from '../../lib/lock-log/grant.sql.js';
import type { ConnectionSettings } from '../support/test-database.js';

export type Release = () => Promise<void>;

export const DESIGN_IDS = ['lease', 'for-update', 'get-lock', 'redlock', 'naive-table'] as const;
export type DesignId = (typeof DESIGN_IDS)[number];

export const DESIGN_LABELS: Record<DesignId, string> = {
  lease: 'nestjs-db-lock (lease)',
  'for-update': 'blocking SELECT … FOR UPDATE',
  'get-lock': 'blocking GET_LOCK',
  redlock: 'node-redlock (local Redis)',
  'naive-table': 'naive table lock (INSERT/DELETE, 50 ms retry)',
};

export interface LockDesign {
  readonly id: DesignId;
  /** Database statements of one successful acquire + release (not counting waiting). */
  readonly usefulStatements: number;
  /** Redis commands of one successful acquire + release. */
  readonly usefulRedisCommands: number;
  /** Takes the lock on `key` for caller `slot` (designs that block hold one connection per caller). */
  acquire(key: string, slot: number): Promise<Release>;
  /** Statements (or Redis commands) sent since creation, failed tries included: the client-side count. */
  sentStatements(): number;
  sentRedisCommands(): number;
  /** Tries that failed outright and were started again by the caller (e.g. redlock's LockError). */
  readonly gaveUp: number;
  close(): Promise<void>;
}

/** Bench tables beside the lock tables: a counter, a row to lock, the naive lock table. */
export const BENCH_SCHEMA = [
  `CREATE TABLE bench_counter (id INT PRIMARY KEY, v BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`,
  `INSERT INTO bench_counter (id, v) VALUES (1, 0), (2, 0), (3, 0), (4, 0)`,
  `CREATE TABLE bench_row_lock (k VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB`,
  `CREATE TABLE bench_audit (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, k VARBINARY(191) NOT NULL, owner CHAR(36) NOT NULL, KEY (owner)) ENGINE=InnoDB`,
  `CREATE TABLE bench_naive_lock (lock_name VARCHAR(64) PRIMARY KEY, holder VARCHAR(64) NOT NULL) ENGINE=InnoDB`,
];

/** Statements of one common-case lease grant round trip (START TRANSACTION … COMMIT). */
export function leaseGrantStatements(): number {
  const targets = resolveTargets('k', 'write', '');
  return leanGrantPlan({
    acquisitionId: 'o',
    holder: 'h',
    processId: '1',
    strategy: 'lease',
    targets,
    leaseMs: 1000,
    waitedMs: 0,
    writerWaitMarkMs: 0,
    writerPreference: true,
    rowLocksAuthoritative: false,
  }).statements.length;
}

/** Connections per caller slot, opened on first use. */
class SlotConnections {
  private readonly connections = new Map<number, Promise<mysql.Connection>>();
  constructor(private readonly settings: ConnectionSettings) {}
  get(slot: number): Promise<mysql.Connection> {
    let connection = this.connections.get(slot);
    if (!connection) {
      connection = mysql.createConnection({ ...this.settings });
      this.connections.set(slot, connection);
    }
    return connection;
  }
  async close(): Promise<void> {
    for (const connection of this.connections.values()) await (await connection).end().catch(() => undefined);
    this.connections.clear();
  }
}

/** This library, lease strategy, default options except the ones the caller passes to the app. */
export function leaseDesign(locks: LockService, options: { mode?: 'read' | 'write' } = {}): LockDesign {
  const grant = leaseGrantStatements();
  const start = locks.stats();
  return {
    id: 'lease',
    usefulStatements: grant + 1,
    usefulRedisCommands: 0,
    gaveUp: 0,
    async acquire(key) {
      // Generous budget: a timeout here would be a finding, reported as an error, not hidden.
      const handle = await locks.acquire(key, { mode: options.mode ?? 'write', timeoutMs: 120_000 });
      return () => handle.release();
    },
    sentStatements() {
      // Client-side estimate from the lock round trips (renewals and the janitor left out): grant
      // tries cost `grant` statements, releases 1 (doorbell waits and rings are counted as one each).
      const now = locks.stats();
      const roundTrips = now.roundTripsBy.locks - start.roundTripsBy.locks;
      const released = now.released - start.released;
      return (roundTrips - released) * grant + released;
    },
    sentRedisCommands: () => 0,
    async close() {},
  };
}

/** Seed 000/004's pessimistic lock: a transaction holds the key's row with FOR UPDATE; COMMIT releases. */
export function forUpdateDesign(settings: ConnectionSettings): LockDesign {
  const slots = new SlotConnections(settings);
  let sent = 0;
  return {
    id: 'for-update',
    usefulStatements: 3,
    usefulRedisCommands: 0,
    gaveUp: 0,
    async acquire(key, slot) {
      const connection = await slots.get(slot);
      sent++;
      await connection.query('START TRANSACTION');
      sent++;
      const [rows] = await connection.query('SELECT k FROM bench_row_lock WHERE k = ? FOR UPDATE', [key]);
      if ((rows as unknown[]).length !== 1) throw new Error(`bench_row_lock has no row '${key}'`);
      return async () => {
        sent++;
        await connection.query('COMMIT');
      };
    },
    sentStatements: () => sent,
    sentRedisCommands: () => 0,
    close: () => slots.close(),
  };
}

/** MySQL/MariaDB's named lock, blocking: GET_LOCK waits in the server, RELEASE_LOCK frees it. */
export function getLockDesign(settings: ConnectionSettings): LockDesign {
  const slots = new SlotConnections(settings);
  let sent = 0;
  return {
    id: 'get-lock',
    usefulStatements: 2,
    usefulRedisCommands: 0,
    gaveUp: 0,
    async acquire(key, slot) {
      const connection = await slots.get(slot);
      for (;;) {
        sent++;
        const [rows] = await connection.query('SELECT GET_LOCK(?, 60) AS got', [key]);
        if (Number((rows as { got: unknown }[])[0]!.got) === 1) break;
      }
      return async () => {
        sent++;
        await connection.query('SELECT RELEASE_LOCK(?)', [key]);
      };
    },
    sentStatements: () => sent,
    sentRedisCommands: () => 0,
    close: () => slots.close(),
  };
}

const ER_DUP_ENTRY = 1062;
const ER_LOCK_WAIT_TIMEOUT = 1205;
const ER_LOCK_DEADLOCK = 1213;
/** The seed's lock() catches any exception as "not acquired"; these are the ones contention produces. */
const NOT_ACQUIRED = new Set([ER_DUP_ENTRY, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT]);

/** The seeds' naive table lock: INSERT a unique row to lock, DELETE it to unlock, retry every 50 ms. */
export function naiveTableDesign(settings: ConnectionSettings, holder: string): LockDesign {
  const pool = mysql.createPool({ ...settings, connectionLimit: 8 });
  let sent = 0;
  return {
    id: 'naive-table',
    usefulStatements: 2,
    usefulRedisCommands: 0,
    gaveUp: 0,
    async acquire(key) {
      for (;;) {
        sent++;
        try {
          await pool.query('INSERT INTO bench_naive_lock (lock_name, holder) VALUES (?, ?)', [key, holder]);
          break;
        } catch (error) {
          // Concurrent INSERT/DELETE of one unique key also deadlocks now and then (InnoDB
          // next-key locks on the unique index): the seed treats that as "not acquired" too.
          if (!NOT_ACQUIRED.has((error as { errno?: number }).errno ?? 0)) throw error;
          await sleep(50);
        }
      }
      return async () => {
        for (let attempt = 1; ; attempt++) {
          sent++;
          try {
            await pool.query('DELETE FROM bench_naive_lock WHERE lock_name = ?', [key]);
            return;
          } catch (error) {
            if ((error as { errno?: number }).errno !== ER_LOCK_DEADLOCK || attempt >= 10) throw error;
          }
        }
      };
    },
    sentStatements: () => sent,
    sentRedisCommands: () => 0,
    close: () => pool.end(),
  };
}

/** node-redlock 4 on the local Redis, default settings (10 retries, 200 ms delay, 100 ms jitter). */
export async function redlockDesign(redisUrl: string): Promise<LockDesign> {
  const { Redis } = await import('ioredis');
  const { default: Redlock } = await import('redlock');
  const client = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  const redlock = new Redlock([client]);
  let sent = 0;
  let gaveUp = 0;
  const design: LockDesign = {
    id: 'redlock',
    usefulStatements: 0,
    usefulRedisCommands: 2,
    get gaveUp() {
      return gaveUp;
    },
    async acquire(key) {
      for (;;) {
        try {
          const lock = await redlock.lock(key, 10_000);
          sent += lock.attempts;
          return async () => {
            sent++;
            await lock.unlock();
          };
        } catch (error) {
          if (!(error instanceof Redlock.LockError)) throw error;
          // Retries exhausted (11 tries): a real caller would report failure; the benchmark
          // counts it and keeps waiting, so its wait time includes the lost tries.
          gaveUp++;
          sent += 11;
        }
      }
    },
    sentStatements: () => 0,
    sentRedisCommands: () => sent,
    async close() {
      client.disconnect();
    },
  };
  return design;
}
