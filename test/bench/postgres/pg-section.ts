/**
 * The PostgreSQL section of `npm run bench`: the library on PostgreSQL against PostgreSQL's own
 * floors, in the same run: two autocommit PK UPDATEs, a bare `SELECT … FOR UPDATE` transaction,
 * `pg_advisory_xact_lock` in a transaction and a plain TypeORM transaction (uncontended, one caller,
 * items interleaved in blocks as in the MySQL section), then the hot key across processes.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { DbLockModule, LockService } from '../../../lib/index.js';
import { PgTestDatabase, pgTestsRun } from '../../support/pg-test-database.js';
import type { BenchConfig } from '../config.js';
import { runUncontended, type UncontendedResult } from '../uncontended.js';
import type { UncontendedItem } from '../uncontended-items.js';
import { type PgContentionFigures, type PgDesign, runPgContention } from './pg-contention.js';

export interface PgBenchResult {
  /** `PostgreSQL 15.8 …` */
  readonly server: string;
  readonly uncontended: UncontendedResult;
  readonly contention: ReadonlyMap<PgDesign, PgContentionFigures>;
}

const UPDATE = (id: number) => `UPDATE bench_counter SET v = v + 1 WHERE id = ${id}`;

/** The floors' key row (not a key the library uses: the floors write its rows by hand). */
export const FLOOR_KEY = `'\\x666c6f6f72'::bytea`;

/**
 * The lease grant of a key known free, as the library sends it but by hand: the key row's token
 * bumped, the holder's log row inserted from it, one autocommit statement answering the row's id.
 * `key`: the key row's bytea literal.
 */
export const grantByHand = (key: string): string =>
  `WITH b AS (UPDATE db_lock SET fencing_token = fencing_token + 1, last_granted_at = clock_timestamp(), no_lease_holders = 0, writer_waiting_until = NULL ` +
  `WHERE lock_key = ${key} RETURNING lock_key, fencing_token, last_granted_at AS now) ` +
  `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
  `SELECT lock_key, 'write', '00000000-0000-4000-8000-000000000000', 'bench:floor', 'lease', fencing_token, 'ACQUIRED', 30000, now, now + interval '30 seconds' ` +
  `FROM b RETURNING id`;
export const GRANT_BY_HAND = grantByHand(FLOOR_KEY);
export const RELEASE_BY_HAND = (id: string) =>
  `UPDATE db_lock_log SET status = 'RELEASED', ended_at = clock_timestamp(), hold_ms = 0 WHERE id = ${id} AND status IN ('ACQUIRED', 'COMPLETED')`;
/** A row-lock hold's statements by hand: the key row's token bumped (the lock), then its audit row. */
const ROW_LOCK_BY_HAND = `UPDATE db_lock SET fencing_token = fencing_token + 1, last_granted_at = clock_timestamp() WHERE lock_key = ${FLOOR_KEY} RETURNING fencing_token`;
const AUDIT_BY_HAND = (token: string) =>
  `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, hold_ms) ` +
  `VALUES (${FLOOR_KEY}, 'write', '00000000-0000-4000-8000-000000000000', 'bench:floor', 'row-lock', ${token}, 'RELEASED', 0, clock_timestamp(), clock_timestamp(), clock_timestamp(), 0)`;

/** Undefined when no PostgreSQL server answers (see pgTestsRun). */
export async function postgresSection(config: BenchConfig, log: (line: string) => void): Promise<PgBenchResult | undefined> {
  if (!(await pgTestsRun())) {
    log('  no PostgreSQL server: section skipped');
    return undefined;
  }
  const db = await PgTestDatabase.create('dblock_bench_pg');
  const floor = new pg.Client({ connectionString: db.url });
  try {
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE bench_counter (id int PRIMARY KEY, v bigint NOT NULL)');
    await dataSource.query('INSERT INTO bench_counter VALUES (1, 0), (2, 0), (3, 0), (4, 0)');
    await dataSource.query(`INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES (${FLOOR_KEY}, 0, 1)`);
    await floor.connect();
    const server = String(((await floor.query('SELECT version() AS v')).rows[0] as { v: string }).v).split(' on ')[0]!;
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, autoLoadEntities: true, poolSize: 10 }),
        DbLockModule.forRoot({ escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
      ],
    })
    class PgBenchApp {}
    const app = await NestFactory.createApplicationContext(PgBenchApp, { logger: ['error'] });
    let uncontended: UncontendedResult;
    try {
      const locks = app.get(LockService);
      uncontended = await runUncontended(pgItems(floor, locks, app.get(DataSource)), () => locks.stats().roundTripsBy.locks, config, log);
    } finally {
      await app.close();
    }
    const contention = await runPgContention(db.url, config, log);
    return { server, uncontended, contention };
  } finally {
    await floor.end().catch(() => undefined);
    await db.drop();
  }
}

function pgItems(floor: pg.Client, locks: LockService, dataSource: DataSource): UncontendedItem[] {
  return [
    {
      id: 'pg-pk-update-x2',
      label: 'two autocommit PK UPDATEs',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        await floor.query(UPDATE(1));
        await floor.query(UPDATE(1));
      },
    },
    {
      id: 'pg-for-update',
      label: 'bare `BEGIN; SELECT … FOR UPDATE` + `COMMIT`',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        await floor.query('BEGIN; SELECT v FROM bench_counter WHERE id = 2 FOR UPDATE');
        await floor.query('COMMIT');
      },
    },
    {
      id: 'pg-advisory',
      label: 'bare `BEGIN; SELECT pg_advisory_xact_lock(…)` + `COMMIT`',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        await floor.query('BEGIN; SELECT pg_advisory_xact_lock(4242)');
        await floor.query('COMMIT');
      },
    },
    {
      id: 'pg-plain-tx',
      label: 'one UPDATE in a plain TypeORM transaction (`dataSource.transaction`)',
      kind: 'floor',
      roundTrips: '3',
      op: () => dataSource.transaction(async (manager) => void (await manager.query(UPDATE(3)))),
    },
    {
      id: 'pg-lease-floor',
      label:
        "the lease grant's physical floor: the one-statement grant of a key known free (its token bumped, the log row inserted from it) by hand, then one PK UPDATE of that row (the release)",
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        const granted = await floor.query(GRANT_BY_HAND);
        await floor.query(RELEASE_BY_HAND(String((granted.rows[0] as { id: string }).id)));
      },
    },
    {
      id: 'pg-lease-decorated-floor',
      label: "the lease decorator path's floor: the one-statement grant by hand, then the plain TypeORM transaction with the same UPDATE",
      kind: 'floor',
      roundTrips: '1 + 3',
      op: async () => {
        await floor.query(GRANT_BY_HAND);
        await dataSource.transaction(async (manager) => void (await manager.query(UPDATE(3))));
      },
    },
    {
      id: 'pg-row-lock-decorated-floor',
      label:
        "the row-lock decorator path's floor: its statements by hand on a plain pg connection, in the library's round trips (BEGIN and the key row's token bump; the UPDATE; the audit row and COMMIT)",
      kind: 'floor',
      roundTrips: '3',
      op: async () => {
        const [, bumped] = (await floor.query(`BEGIN; ${ROW_LOCK_BY_HAND}`)) as unknown as pg.QueryResult[];
        await floor.query(UPDATE(4));
        await floor.query(`${AUDIT_BY_HAND(String((bumped!.rows[0] as { fencing_token: string }).fencing_token))}; COMMIT`);
      },
    },
    {
      id: 'pg-lease',
      label: '`withLock` (lease), empty fn: acquire + release',
      kind: 'library',
      roundTrips: '2',
      countsRoundTrips: true,
      op: () => locks.withLock('bench:pg:lease', async () => undefined),
    },
    {
      id: 'pg-row-lock',
      label: '`withLock` (row-lock), empty fn: BEGIN + UPDATE, then audit row + COMMIT',
      kind: 'library',
      roundTrips: '2',
      op: () => locks.withLock('bench:pg:row-lock', async () => undefined, { strategy: 'row-lock' }),
    },
    {
      id: 'pg-lease-decorated',
      label: '`runLocked` (lease, as `@WriteLock`) running one UPDATE in its fenced transaction',
      kind: 'library',
      roundTrips: '4',
      op: () => locks.runLocked('bench:pg:lease-decorated', async () => void (await locks.manager.query(UPDATE(4)))),
    },
    {
      id: 'pg-row-lock-decorated',
      label: '`runLocked` (row-lock, as `@WriteLock`) running one UPDATE',
      kind: 'library',
      roundTrips: '3',
      op: () => locks.runLocked('bench:pg:row-lock-decorated', async () => void (await locks.manager.query(UPDATE(4))), { strategy: 'row-lock' }),
    },
  ];
}
