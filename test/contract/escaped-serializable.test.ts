import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Injectable } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { EscapedWriteError, type LockIsolationLevel, LockService, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * The self-deadlock trap with a documented isolation level (README: `isolationLevel`; guide,
 * escaped writes, 'warn': "If the fenced transaction already holds row locks, the write's lock wait
 * is bounded to 1 s ... the call fails with EscapedWriteError (reason: 'lock-wait')").
 *
 * At SERIALIZABLE every plain read of the fenced transaction takes a shared row lock (InnoDB reads
 * as LOCK IN SHARE MODE when autocommit is off). An escaped UPDATE of a row the fenced call has read
 * waits for that lock, which only the end of the call releases: the same self-deadlock as after a
 * fenced write. The escaped connection's own innodb_lock_wait_timeout is set to 6 s here (instead
 * of the server's 50 s) so that the unbounded wait ends inside the test budget (PostgreSQL: its
 * lock_timeout, unset by default, also 6 s).
 *
 * PostgreSQL's SERIALIZABLE is serializable snapshot isolation: a plain read takes a predicate
 * (SIRead) lock, which blocks no writer. There is no self-deadlock to cut: the escaped write
 * commits at once and the call resolves, which is what is checked there (a read that did block
 * would run into the 6 s wait and fail the time bound).
 */
const ESCAPED_SESSION_WAIT_S = 6;
/** 1 s bound + margin for a loaded 2-core machine, well below the 6 s unbounded wait. */
const ANSWER_WITHIN_MS = 4_000;

@Injectable()
class Probe {
  escapeRunner!: QueryRunner;
  constructor(readonly locks: LockService) {}

  async readThenEscape(isolationLevel: LockIsolationLevel, read: string): Promise<void> {
    return this.locks.runLocked(
      'ser',
      async () => {
        await this.locks.manager.query(read);
        await this.escapeRunner.query('UPDATE ser_accounts SET balance = balance + 1 WHERE id = 1');
      },
      { isolationLevel },
    );
  }

  @WriteLock('ser:decorated', { isolationLevel: 'SERIALIZABLE' })
  async decorated(): Promise<void> {
    await this.locks.manager.query('SELECT balance FROM ser_accounts WHERE id = 1');
    await this.escapeRunner.query('UPDATE ser_accounts SET balance = balance + 1 WHERE id = 1');
  }
}

contractSuite('fenced-decorators', 'escaped write waiting on a SERIALIZABLE fence read', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let probe: Probe;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE ser_accounts (id INT PRIMARY KEY, balance INT NOT NULL)${db.sql.tableOptions}`);
    await db.query('INSERT INTO ser_accounts VALUES (1, 0)');
    ({ app } = await createLockApp(db.settings, target.options({ janitor: false }), { providers: [Probe] }));
    probe = app.get(Probe);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  async function timed(call: () => Promise<unknown>): Promise<{ error: unknown; tookMs: number }> {
    const runner = app.get(DataSource).createQueryRunner();
    await runner.connect();
    await runner.query(
      db.type === 'postgres' ? `SET lock_timeout = '${ESCAPED_SESSION_WAIT_S}s'` : `SET SESSION innodb_lock_wait_timeout = ${ESCAPED_SESSION_WAIT_S}`,
    );
    probe.escapeRunner = runner;
    const started = performance.now();
    try {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      return { error, tookMs: performance.now() - started };
    } finally {
      await runner.release();
    }
  }

  it('control: after a locking read (FOR UPDATE) the escaped write is cut after 1 s with EscapedWriteError', async () => {
    const { error, tookMs } = await timed(() => probe.readThenEscape('READ COMMITTED', 'SELECT balance FROM ser_accounts WHERE id = 1 FOR UPDATE'));
    assert.ok(error instanceof EscapedWriteError, `EscapedWriteError, got ${String(error)}`);
    assert.ok(tookMs < ANSWER_WITHIN_MS, `answered after ${Math.round(tookMs)} ms`);
  });

  /** A SERIALIZABLE fenced read, then the escaped write: cut with EscapedWriteError on MySQL; on PostgreSQL not held up, and committed. */
  async function serializableRead(call: () => Promise<unknown>): Promise<void> {
    const balance = async () => Number((await db.query<{ balance: number }[]>('SELECT balance FROM ser_accounts WHERE id = 1'))[0]!.balance);
    const before = await balance();
    const { error, tookMs } = await timed(call);
    if (db.type === 'postgres') {
      assert.equal(error, undefined, `resolves: no row lock to wait for under SSI; got ${String(error)}`);
      assert.ok(tookMs < ANSWER_WITHIN_MS, `answered after ${Math.round(tookMs)} ms`);
      assert.equal(await balance(), before + 1, 'the escaped write committed');
      return;
    }
    assert.ok(
      error instanceof EscapedWriteError && tookMs < ANSWER_WITHIN_MS,
      `EscapedWriteError within ${ANSWER_WITHIN_MS} ms expected; got after ${Math.round(tookMs)} ms: ${String(error)}`,
    );
    assert.equal(await balance(), before, 'the escaped write was cut');
  }

  it('runLocked at SERIALIZABLE: a plain read holds the row lock (MySQL); the escaped write must be cut after 1 s too', async () => {
    await serializableRead(() => probe.readThenEscape('SERIALIZABLE', 'SELECT balance FROM ser_accounts WHERE id = 1'));
  });

  it("@WriteLock(…, { isolationLevel: 'SERIALIZABLE' }): the same", async () => {
    await serializableRead(() => probe.decorated());
  });
});
