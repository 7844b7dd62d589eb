import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SchedulerRegistry } from '@nestjs/schedule';
import mysql from 'mysql2/promise';
import request from 'supertest';
import { ReconciliationService } from '../../sample-app/lending/reconciliation.service.js';
import { eventually } from '../support/lock-app.js';
import { logRows, moneySnapshot, type SampleApp, startSampleApp } from '../support/sample-app.js';

/** Waits until a transaction of this test's database waits for a row lock (other test files share the server). */
async function waitForRowLockWait(s: SampleApp): Promise<void> {
  if (!(await s.db.transactionSeen((t) => t.lockWait, 10_000))) throw new Error('the repayment never waited for the loan row');
}

/**
 * The sample app when locks are busy or lost. Requests wait LOCK_TIMEOUT_MS = 300 ms here. The
 * test holds locks through the app's own LockService, as a request on another instance would.
 */
describe('sample app: busy and lost locks', () => {
  let s: SampleApp;

  before(async () => {
    s = await startSampleApp({ LOCK_TIMEOUT_MS: '300' });
  });
  after(async () => {
    await s?.close();
  });

  it('a repayment of a loan whose lock stays busy waits its timeout, then 423 Locked: nothing done, no row left', async () => {
    const before = await moneySnapshot(s.db);
    const held = await s.locks.acquire('loan:2');
    let response;
    const started = performance.now();
    try {
      response = await request(s.server).post('/loans/2/repay').send({ cents: 700 });
    } finally {
      await held.release();
    }
    const waited = performance.now() - started;
    assert.equal(response.status, 423, JSON.stringify(response.body));
    assert.equal(response.body.error, 'LockTimeoutError');
    assert.equal(response.headers['retry-after'], '1');
    assert.ok(waited >= 290, `waited ${waited} ms`);
    assert.deepEqual(await moneySnapshot(s.db), before);
    // Only the test's own hold: a caller that timed out left no row.
    assert.deepEqual(
      (await logRows(s.db, 'p2p:loan:2')).map((r) => r.status),
      ['RELEASED'],
    );

    const retry = await request(s.server).post('/loans/2/repay').send({ cents: 700 });
    assert.equal(retry.status, 201);
  });

  it('transfers share a loan with other readers, repayments do not; a repayment holding the loan blocks transfers', async () => {
    const reading = await s.locks.acquire([{ key: 'loan:3', mode: 'read' }]); // as a long transfer would
    try {
      const transfer = await request(s.server).post('/loans/3/claims/10/transfer').send({ buyerId: 2 });
      assert.equal(transfer.status, 201, 'a transfer runs alongside another reader');
      const statement = await request(s.server).get('/loans/3');
      assert.equal(statement.status, 200, 'so does a statement');
      const repay = await request(s.server).post('/loans/3/repay').send({ cents: 10 });
      assert.equal(repay.status, 423, 'a repayment waits for the readers');
    } finally {
      await reading.release();
    }
    const writing = await s.locks.acquire('loan:3'); // as a long repayment would
    try {
      const transfer = await request(s.server).post('/loans/3/claims/10/transfer').send({ buyerId: 3 });
      assert.equal(transfer.status, 423, 'a transfer waits for the repayment');
    } finally {
      await writing.release();
    }
    const [claim] = await s.db.query<Record<string, string>[]>('SELECT investor_id FROM p2p_claim WHERE id = 10');
    assert.equal(Number(claim!.investor_id), 2, 'only the transfer that got its locks happened');
  });

  it('a repayment whose lock is taken over before it commits rolls back and answers 409 (fenced transaction)', async () => {
    const before = await moneySnapshot(s.db);
    // Stall the repayment inside its transaction: hold the loan row from another connection,
    // so its UPDATE of the loan waits (the way a GC pause or a slow disk would stall it).
    const other = await mysql.createConnection({ ...s.db.settings });
    try {
      await other.query('START TRANSACTION');
      await other.query('SELECT id FROM p2p_loan WHERE id = 1 FOR UPDATE');
      const pending = request(s.server)
        .post('/loans/1/repay')
        .send({ cents: 900 })
        .then((r) => r);
      await waitForRowLockWait(s);
      // An operator (or a takeover after the lease ran out) ends the stalled holder's lock.
      const evicted = await s.locks.forceRelease('loan:1', 'test: stalled repayment');
      assert.equal(evicted.length, 1);
      await other.query('ROLLBACK');
      const response = await pending;
      assert.equal(response.status, 409, JSON.stringify(response.body));
      assert.equal(response.body.error, 'LockLostError');
    } finally {
      await other.end();
    }
    assert.deepEqual(await moneySnapshot(s.db), before, 'none of its writes committed');
    const rows = await logRows(s.db, 'p2p:loan:1');
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.status, 'RELEASED');
    assert.equal(rows[0]!.note, 'force-released: test: stalled repayment');
  });

  it('the reconciliation cron skips while another holder runs it, and runs once the lock is free', async () => {
    const reconciliation = s.app.get(ReconciliationService);
    const job = s.app.get(SchedulerRegistry).getCronJob('reconciliation');
    const skippedBefore = s.locks.stats().skipped;
    const held = await s.locks.acquire('reconciliation'); // another instance is running it
    try {
      assert.equal(await reconciliation.reconcile(), undefined, 'a direct call skips');
      await job.fireOnTick(); // the scheduler's own call path
      await eventually(() => s.locks.stats().skipped === skippedBefore + 2, 5_000, 'the cron tick to skip');
    } finally {
      await held.release();
    }
    const [{ n }] = await s.db.query<[{ n: number }]>('SELECT COUNT(*) AS n FROM p2p_reconciliation');
    assert.equal(Number(n), 0, 'skipped runs did nothing');
    assert.deepEqual(
      (await logRows(s.db, 'p2p:reconciliation')).map((r) => r.status),
      ['RELEASED'],
      'skips leave no row',
    );

    const result = await reconciliation.reconcile();
    assert.ok(result, 'runs once the lock is free');
    assert.equal(result.balanced, true, JSON.stringify(result));
    const [{ repaid }] = await s.db.query<[{ repaid: string }]>('SELECT SUM(repaid_cents) AS repaid FROM p2p_loan');
    assert.equal(result.repaidCents, Number(repaid));
    assert.ok(result.repaidCents > 0);
    const runs = await s.db.query<Record<string, unknown>[]>('SELECT balanced, repaid_cents FROM p2p_reconciliation');
    assert.deepEqual(
      runs.map((r) => [Number(r.balanced), Number(r.repaid_cents)]),
      [[1, result.repaidCents]],
    );
    assert.deepEqual(
      (await logRows(s.db, 'p2p:reconciliation')).map((r) => `${r.mode} ${r.status}`),
      ['write RELEASED', 'write RELEASED'],
    );
  });
});
