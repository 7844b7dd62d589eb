import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Module } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import {
  DbLockModule,
  type LockHandle,
  type LockKeys,
  type LockOptions,
  LockLostError,
  LockService,
  LockTimeoutError,
  SemaphoreLimitError,
} from '../../lib/index.js';
import { holdUntilReleased } from '../support/held-lock.js';
import { heldLockOf, partsOf } from '../support/lock-internals.js';
import { eventually } from '../support/lock-app.js';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { GRANT_STATEMENTS, lockDecision, lockRows } from '../../lib/store/postgres/pg-grant-decision.sql.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/** A short lease, so that takeovers come within a test. */
const LEASE_MS = 800;

/**
 * The lease strategy on PostgreSQL inside one process: read/write with writer preference, several
 * keys all or none, single tries and sub-second budgets, tokens that only grow across both
 * strategies of a key (and the two never hold one key at once), a stalled holder taken over with
 * its fenced commit refused, semaphores, and the janitor's reclaim of an expired holder.
 */
describe('lease on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_lease');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL)');
    await dataSource.query('INSERT INTO account VALUES (1, 0)');
    app = await boot();
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db.drop();
  });

  async function boot(): Promise<INestApplicationContext> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }),
        DbLockModule.forRoot({ leaseMs: LEASE_MS, escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
      ],
    })
    class PgApp {}
    return NestFactory.createApplicationContext(PgApp, { logger: ['error'] });
  }

  const hold = (keys: LockKeys, options: LockOptions = {}) => holdUntilReleased(locks, keys, options);
  const oneTry = (keys: LockKeys, options: LockOptions = {}) =>
    locks
      .withLock(keys, async () => 'in', { ...options, timeoutMs: 0 })
      .catch((error: unknown) => (error instanceof LockTimeoutError ? 'refused' : Promise.reject(error)));
  const finish = async (...holds: { release: () => void; done: Promise<unknown> }[]) => {
    for (const h of holds) h.release();
    await Promise.all(holds.map((h) => h.done));
  };
  const logRows = (key: string) =>
    db.query<{ status: string; strategy: string; mode: string; fencing_token: string; note: string | null }>(
      'SELECT status, strategy, mode, fencing_token, note FROM db_lock_log WHERE lock_key = $1::text::bytea ORDER BY id',
      [key],
    );

  it("readers share a key, writers exclude; another process's waiting writer holds back new readers", async () => {
    const reader = await hold('rw', { mode: 'read' });
    assert.equal(await oneTry('rw', { mode: 'read' }), 'in');
    assert.equal(await oneTry('rw'), 'refused');
    // The writer in a second app (a process of its own to the library): only the database's mark can hold our readers back.
    const other = await boot();
    try {
      const writer = other.get(LockService).withLock('rw', async () => 'writer in', { timeoutMs: 10_000 });
      // Once the writer was refused and asked again, it marked the key: a new reader is refused although only readers hold it.
      await eventually(async () => (await oneTry('rw', { mode: 'read' })) === 'refused', 5_000, 'a new reader held back');
      await finish(reader);
      assert.equal(await writer, 'writer in');
    } finally {
      await other.close();
    }
    const held = await hold('rw');
    assert.equal(await oneTry('rw', { mode: 'read' }), 'refused');
    await finish(held);
    const rows = await logRows('rw');
    assert.deepEqual([...new Set(rows.map((r) => r.status))], ['RELEASED']);
    assert.equal(rows.filter((r) => r.mode === 'write').length, 2);
  });

  it('several keys are taken all or none; opposite orders never deadlock, one holder at a time', async () => {
    const b = await hold('m:b');
    assert.equal(await oneTry(['m:a', 'm:b']), 'refused');
    assert.equal(await oneTry('m:a'), 'in', "the refused grant kept 'm:a'");
    await finish(b);
    let inside = 0;
    let most = 0;
    const section = async () => {
      most = Math.max(most, ++inside);
      await sleep(1);
      inside--;
    };
    const calls = (keys: string[]) => Array.from({ length: 15 }, () => locks.withLock(keys, section, { timeoutMs: 30_000 }));
    await Promise.all([...calls(['o:x', 'o:y']), ...calls(['o:y', 'o:x'])]);
    assert.equal(most, 1);
  });

  it('a sub-second budget holds and a single try answers at once', async () => {
    const holder = await hold('busy');
    let started = performance.now();
    const timedOut = await locks.withLock('busy', async () => 'in', { timeoutMs: 200 }).catch((error: unknown) => error);
    const waited = performance.now() - started;
    assert.ok(timedOut instanceof LockTimeoutError, String(timedOut));
    // Not before its budget; after it by at most a round trip or two and the backoff (margin for a loaded 2-core host).
    assert.ok(waited >= 190 && waited < 1_500, `waited ${waited.toFixed(0)} ms for a 200 ms budget`);
    started = performance.now();
    assert.equal(await oneTry('busy'), 'refused');
    assert.ok(performance.now() - started < 1_000);
    await finish(holder);
  });

  it('a key row another transaction keeps locked reads busy: LockTimeoutError within the budget, sub-second or past the 1 s lock wait', async () => {
    await locks.withLock('row-held', async () => undefined);
    const other = await (await db.dataSource()).createQueryRunner();
    await other.connect();
    await other.startTransaction();
    try {
      await other.query("SELECT 1 FROM db_lock WHERE lock_key = 'row-held'::bytea FOR UPDATE");
      for (const timeoutMs of [300, 1_600]) {
        const started = performance.now();
        const failure = await locks.withLock('row-held', async () => 'in', { timeoutMs }).catch((error: unknown) => error);
        const waited = performance.now() - started;
        assert.ok(failure instanceof LockTimeoutError, `${timeoutMs} ms: ${String(failure)}`);
        // Not before its budget; after it by at most the grant's grace and a round trip (margin for a loaded 2-core host).
        assert.ok(waited >= timeoutMs - 10 && waited < timeoutMs + 1_500, `waited ${waited.toFixed(0)} ms for a ${timeoutMs} ms budget`);
      }
    } finally {
      await other.rollbackTransaction();
      await other.release();
    }
    assert.equal(await oneTry('row-held'), 'in');
  });

  it('a first-use storm: two processes take 100 new keys at once, several keys per call; every call gets in, tokens 1..n per key', async () => {
    const other = await boot();
    try {
      const keys = Array.from({ length: 100 }, (_, i) => `storm:${i}`);
      const calls = (service: LockService) =>
        keys.map((key, i) => service.withLock([key, keys[(i + 1) % keys.length]!], async (handle) => handle.fencingToken, { timeoutMs: 30_000 }));
      const tokens = await Promise.all([...calls(locks), ...calls(other.get(LockService))]);
      assert.equal(tokens.length, 200);
      const rows = await db.query<{ lock_key: Buffer; tokens: string[]; rows: string[] }>(
        "SELECT lock_key, array_agg(fencing_token ORDER BY fencing_token)::text[] AS tokens, array_agg(fencing_token || ' ' || status || ' ' || owner || ' ' || coalesce(note, '') ORDER BY fencing_token)::text[] AS rows " +
          "FROM db_lock_log WHERE lock_key >= 'storm:'::bytea AND lock_key < 'storm;'::bytea GROUP BY lock_key",
      );
      assert.equal(rows.length, 100);
      // Each key is in 4 calls (as the first and as the second key, from both processes): 4 holds,
      // tokens 1..n, none shared. A grant that answered after its (short) lease may have run out
      // on a loaded host is given back, never handed to its caller: its token is used, not reused.
      for (const row of rows) {
        const what = `${String(row.lock_key)}: ${row.rows.join('; ')}`;
        const held = row.rows.filter((r) => !r.includes('given back'));
        assert.equal(held.length, 4, what);
        assert.deepEqual(
          row.tokens.map(Number),
          row.tokens.map((_, i) => i + 1),
          what,
        );
      }
    } finally {
      await other.close();
    }
  });

  it('a grant decides only on key rows its own transaction locked (a row another grant created meanwhile is not enough)', async () => {
    await locks.withLock('decided', async () => undefined);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(GRANT_STATEMENTS.sql);
      const targets = resolveTargets('decided', 'write', '');
      const input = {
        request: {
          acquisitionId: randomUUID(),
          strategy: 'lease' as const,
          targets,
          leaseMs: 5_000,
          waitedMs: 0,
          writerWaitMarkMs: 0,
          writerPreference: true,
        },
        holder: 'test',
        processId: '0',
        waitMs: 1_000,
      };
      const decide = async (lockFirst: boolean) => {
        const answers = (await client.query(
          `BEGIN; ${lockFirst ? `${lockRows(targets.map((t) => t.bytes))}; ` : ''}${lockDecision(input)}; ROLLBACK`,
        )) as unknown as pg.QueryResult[];
        return (answers[answers.length - 2]!.rows[0] as { granted: boolean }).granted;
      };
      // The key row is there and free: without its lock the decision refuses (its snapshot could show a row another grant just committed).
      assert.equal(await decide(false), false);
      assert.equal(await decide(true), true);
    } finally {
      await client.end();
    }
  });

  it("a key's tokens only grow across both strategies, and the two never hold it at once", async () => {
    const tokens: number[] = [];
    let inside = 0;
    let most = 0;
    const section = (strategy: 'lease' | 'row-lock') => () =>
      locks.withLock(
        'mixed',
        async (handle: LockHandle) => {
          most = Math.max(most, ++inside);
          tokens.push(handle.fencingToken);
          await sleep(2);
          inside--;
        },
        { strategy, timeoutMs: 30_000 },
      );
    const run = async (strategy: 'lease' | 'row-lock') => {
      for (let i = 0; i < 12; i++) await section(strategy)();
    };
    await Promise.all([run('lease'), run('row-lock'), run('lease'), run('row-lock')]);
    assert.equal(most, 1, 'a lease holder and a row-lock holder were inside at once');
    assert.deepEqual(
      tokens,
      [...tokens].sort((a, b) => a - b),
    );
    assert.equal(new Set(tokens).size, tokens.length);
    const strategies = new Set((await logRows('mixed')).map((r) => r.strategy));
    assert.deepEqual([...strategies].sort(), ['lease', 'row-lock']);
  });

  it('a stalled holder is taken over after its lease: its fenced commit is refused and its work rolled back', async () => {
    let stalled!: () => void;
    const resumed = new Promise<void>((resolve) => (stalled = resolve));
    const first = locks
      .runLocked('stalled', async (handle) => {
        // As if its process froze: no renewal, no local abort (its rows no longer follow the process lease).
        partsOf(locks).watchdog.remove(heldLockOf(handle));
        await db.query(`UPDATE db_lock_log SET process_id = NULL WHERE id IN (${heldLockOf(handle).rowIds.join(', ')})`);
        await resumed;
        // Written after the stall (a row it had written before would keep the next holder's write waiting on it).
        await locks.manager.query('UPDATE account SET balance = balance + 1 WHERE id = 1');
      })
      .catch((error: unknown) => error);
    await eventually(async () => (await logRows('stalled')).length === 1, 5_000, 'the first hold');
    const second = await locks.runLocked(
      'stalled',
      async (handle) => {
        await locks.manager.query('UPDATE account SET balance = balance + 10 WHERE id = 1');
        return handle.fencingToken;
      },
      { timeoutMs: 10_000 },
    );
    stalled();
    const lost = await first;
    assert.ok(lost instanceof LockLostError, String(lost));
    assert.equal(second, 2);
    assert.equal(Number((await db.query<{ balance: number }>('SELECT balance FROM account WHERE id = 1'))[0]!.balance), 10);
    const rows = await logRows('stalled');
    assert.deepEqual(
      rows.map((r) => [r.status, Number(r.fencing_token)]),
      [
        ['EXPIRED', 1],
        ['RELEASED', 2],
      ],
    );
    assert.match(rows[0]!.note ?? '', /^taken over by /);
  });

  it('a semaphore lets `limit` holders in at once, each with its own token; a different limit is refused', async () => {
    const permits = await Promise.all([1, 2].map(() => holdUntilReleasedPermit('pool', 2)));
    const third = await locks.withSemaphore('pool', 2, async () => 'in', { timeoutMs: 0 }).catch((error: unknown) => error);
    assert.ok(third instanceof LockTimeoutError, String(third));
    await assert.rejects(
      locks.withSemaphore('pool', 3, async () => 'in', { timeoutMs: 0 }),
      (error: unknown) => error instanceof SemaphoreLimitError,
    );
    assert.equal(await oneTry('pool'), 'refused', 'a lock of a key whose permits are live');
    await finish(...permits);
    assert.equal(await locks.withSemaphore('pool', 2, async () => 'in', { timeoutMs: 0 }), 'in');
    const rows = await logRows('pool');
    assert.deepEqual(
      rows.map((r) => [r.mode, Number(r.fencing_token)]),
      [
        ['permit', 1],
        ['permit', 2],
        ['permit', 3],
      ],
    );
  });

  it('the janitor reclaims a holder whose lease ran out (its process stopped renewing it)', async () => {
    const held = await hold('forgotten');
    const handle = locks.currentLock;
    assert.equal(handle, undefined);
    const [row] = await db.query<{ id: string }>("SELECT id FROM db_lock_log WHERE lock_key = 'forgotten'::bytea AND status = 'ACQUIRED'");
    await db.query("UPDATE db_lock_log SET process_id = NULL, expires_at = clock_timestamp() - interval '1 second' WHERE id = $1", [row!.id]);
    const report = await locks.runJanitor();
    assert.equal(report.ran, true);
    assert.ok(report.reclaimed >= 1, JSON.stringify(report));
    assert.equal((await logRows('forgotten'))[0]!.status, 'EXPIRED');
    held.release();
    await held.done.catch(() => undefined);
    assert.equal(await oneTry('forgotten'), 'in');
  });

  /** Holds a permit of `key` until released. */
  async function holdUntilReleasedPermit(key: string, limit: number) {
    let release!: () => void;
    let held!: () => void;
    const heldNow = new Promise<void>((resolve) => (held = resolve));
    const done = locks.withSemaphore(
      key,
      limit,
      async () => {
        held();
        await new Promise<void>((resolve) => (release = resolve));
      },
      { timeoutMs: 5_000 },
    );
    await heldNow;
    return { release: () => release(), done };
  }
});
