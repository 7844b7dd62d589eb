import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type LockHandle, LockService, LockTimeoutError } from '../../lib/index.js';
import { eventually } from '../support/lock-app.js';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { GRANT_STATEMENTS, lockDecision, lockRows } from '../../lib/store/postgres/pg-grant-decision.sql.js';
import { pgTestsRun } from '../support/pg-test-database.js';
import { pgLeaseFixture } from '../support/pg-lease-fixture.js';

/**
 * The lease strategy on PostgreSQL inside one process: read/write with writer preference, several
 * keys all or none, single tries and sub-second budgets, a first-use storm, grants that decide only
 * on key rows they locked, and tokens that only grow across both strategies of a key (the two
 * never hold one key at once). Takeovers, semaphores and the janitor: lease-expiry.test.ts.
 */
describe('lease on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  const fixture = pgLeaseFixture('dblock_pg_lease');
  const { hold, oneTry, finish, logRows, boot } = fixture;

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
    const calls = (keys: string[]) => Array.from({ length: 15 }, () => fixture.locks.withLock(keys, section, { timeoutMs: 30_000 }));
    await Promise.all([...calls(['o:x', 'o:y']), ...calls(['o:y', 'o:x'])]);
    assert.equal(most, 1);
  });

  it('a sub-second budget holds and a single try answers at once', async () => {
    const holder = await hold('busy');
    let started = performance.now();
    const timedOut = await fixture.locks.withLock('busy', async () => 'in', { timeoutMs: 200 }).catch((error: unknown) => error);
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
    await fixture.locks.withLock('row-held', async () => undefined);
    const other = await (await fixture.db.dataSource()).createQueryRunner();
    await other.connect();
    await other.startTransaction();
    try {
      await other.query("SELECT 1 FROM db_lock WHERE lock_key = 'row-held'::bytea FOR UPDATE");
      for (const timeoutMs of [300, 1_600]) {
        const started = performance.now();
        const failure = await fixture.locks.withLock('row-held', async () => 'in', { timeoutMs }).catch((error: unknown) => error);
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
        // A lease of its own, not the fixture's short one: 400 calls in two apps on a loaded host can
        // hold a holder's renewal past 800 ms, and a takeover is not what this test is about.
        keys.map((key, i) =>
          service.withLock([key, keys[(i + 1) % keys.length]!], async (handle) => handle.fencingToken, { timeoutMs: 30_000, leaseMs: 30_000 }),
        );
      const tokens = await Promise.all([...calls(fixture.locks), ...calls(other.get(LockService))]);
      assert.equal(tokens.length, 200);
      const rows = await fixture.db.query<{ lock_key: Buffer; tokens: string[]; rows: string[] }>(
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
    await fixture.locks.withLock('decided', async () => undefined);
    const client = new pg.Client({ connectionString: fixture.db.url });
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
      fixture.locks.withLock(
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
});
