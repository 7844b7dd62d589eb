import 'reflect-metadata';
import { after, before } from 'node:test';
import { Module } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DbLockModule, type LockKeys, type LockOptions, LockService, LockTimeoutError } from '../../lib/index.js';
import { holdUntilReleased } from './held-lock.js';
import { PgTestDatabase } from './pg-test-database.js';

/** A short lease, so that takeovers come within a test. */
export const PG_LEASE_MS = 800;

/** What the lease tests on PostgreSQL share: a database with an `account` table, one app, and helpers on it. */
export interface PgLeaseFixture {
  readonly db: PgTestDatabase;
  readonly locks: LockService;
  /** Another app on the same database (a process of its own to the library); the caller closes it. */
  boot(): Promise<INestApplicationContext>;
  hold(keys: LockKeys, options?: LockOptions): ReturnType<typeof holdUntilReleased>;
  /** A single try: 'in' or 'refused'. */
  oneTry(keys: LockKeys, options?: LockOptions): Promise<string>;
  finish(...holds: { release: () => void; done: Promise<unknown> }[]): Promise<void>;
  logRows(key: string): Promise<{ status: string; strategy: string; mode: string; fencing_token: string; note: string | null }[]>;
}

/** Registers the suite's before/after hooks (call it inside the describe) and returns the fixture, ready once `before` ran. */
export function pgLeaseFixture(prefix: string): PgLeaseFixture {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  const boot = async (): Promise<INestApplicationContext> => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }),
        DbLockModule.forRoot({ leaseMs: PG_LEASE_MS, escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
      ],
    })
    class PgApp {}
    return NestFactory.createApplicationContext(PgApp, { logger: ['error'] });
  };
  before(async () => {
    db = await PgTestDatabase.create(prefix);
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL)');
    await dataSource.query('INSERT INTO account VALUES (1, 0)');
    app = await boot();
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });
  return {
    get db() {
      return db;
    },
    get locks() {
      return locks;
    },
    boot,
    hold: (keys, options = {}) => holdUntilReleased(locks, keys, options),
    oneTry: (keys, options = {}) =>
      locks
        .withLock(keys, async () => 'in', { ...options, timeoutMs: 0 })
        .catch((error: unknown) => (error instanceof LockTimeoutError ? 'refused' : Promise.reject(error))),
    finish: async (...holds) => {
      for (const h of holds) h.release();
      await Promise.all(holds.map((h) => h.done));
    },
    logRows: (key) =>
      db.query('SELECT status, strategy, mode, fencing_token, note FROM db_lock_log WHERE lock_key = $1::text::bytea ORDER BY id', [key]),
  };
}
