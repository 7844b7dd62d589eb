import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import request from 'supertest';
import { logRows, moneySnapshot, type SampleApp, startSampleApp } from '../support/sample-app.js';

/**
 * The sample app's services and HTTP mapping as docs/guide/sample-and-demo.md
 * documents them: lock rows of failed calls, 423 for each locked endpoint, stats invariants.
 */
describe('sample app lock rows, statuses and stats', () => {
  let s: SampleApp;

  before(async () => {
    s = await startSampleApp({ LOCK_TIMEOUT_MS: '300' });
  });
  after(async () => {
    await s?.close();
  });

  it('a transfer to an unknown buyer is a 404, both of its lock rows end FAILED, nothing changes', async () => {
    const before = await moneySnapshot(s.db);
    const rowsBefore = (await logRows(s.db, 'p2p:')).length;
    const response = await request(s.server).post('/loans/2/claims/5/transfer').send({ buyerId: 99 });
    assert.equal(response.status, 404, JSON.stringify(response.body));
    assert.deepEqual(await moneySnapshot(s.db), before);
    const added = (await logRows(s.db, 'p2p:')).slice(rowsBefore);
    assert.deepEqual(added.map((r) => `${r.key} ${r.mode} ${r.status}`).sort(), ['p2p:claim:5 write FAILED', 'p2p:loan:2 read FAILED']);
  });

  it('a statement of an unknown loan is a 404 with its read row FAILED', async () => {
    const rowsBefore = (await logRows(s.db, 'p2p:loan:77')).length;
    const response = await request(s.server).get('/loans/77');
    assert.equal(response.status, 404, JSON.stringify(response.body));
    const added = (await logRows(s.db, 'p2p:loan:77')).slice(rowsBefore);
    assert.deepEqual(
      added.map((r) => `${r.mode} ${r.status}`),
      ['read FAILED'],
    );
  });

  it('an order while the day counter lock is held waits the timeout, then 423 with Retry-After; nothing stored', async () => {
    const [{ day }] = await s.db.query<[{ day: string }]>(`SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y%m%d') AS day`);
    const held = await s.locks.acquire(`order-counter:${day}`);
    let response;
    try {
      response = await request(s.server).post('/orders');
    } finally {
      await held.release();
    }
    assert.equal(response.status, 423, JSON.stringify(response.body));
    assert.equal(response.body.error, 'LockTimeoutError');
    assert.equal(response.headers['retry-after'], '1');
    const [{ n }] = await s.db.query<[{ n: number }]>('SELECT COUNT(*) AS n FROM p2p_order');
    assert.equal(Number(n), 0);
    const ok = await request(s.server).post('/orders');
    assert.equal(ok.status, 201);
    assert.match(ok.body.orderNumber, new RegExp(`^ORD-${day}-000001$`));
  });

  it('a statement waits for a repayment-like writer and answers 423; a transfer of a held claim too', async () => {
    const writer = await s.locks.acquire('loan:3');
    try {
      const statement = await request(s.server).get('/loans/3');
      assert.equal(statement.status, 423, JSON.stringify(statement.body));
    } finally {
      await writer.release();
    }
    const claim = await s.locks.acquire('claim:11');
    try {
      const transfer = await request(s.server).post('/loans/3/claims/11/transfer').send({ buyerId: 1 });
      assert.equal(transfer.status, 423, JSON.stringify(transfer.body));
      // The loan read lock of that transfer was not kept: a repayment goes through at once.
      const repay = await request(s.server).post('/loans/3/repay').send({ cents: 10 });
      assert.equal(repay.status, 201, JSON.stringify(repay.body));
    } finally {
      await claim.release();
    }
  });

  it('after all calls settled: held 0, waiting 0, every grant given back (acquired = released + lost)', async () => {
    const stats = (await request(s.server).get('/locks/stats')).body as {
      held: number;
      waiting: number;
      acquired: number;
      released: number;
      lost: number;
      timedOut: number;
    };
    assert.equal(stats.held, 0, JSON.stringify(stats));
    assert.equal(stats.waiting, 0, JSON.stringify(stats));
    assert.equal(stats.acquired, stats.released + stats.lost, `acquired ${stats.acquired} != released ${stats.released} + lost ${stats.lost}`);
    assert.equal(stats.timedOut, 3, `timedOut ${stats.timedOut}: three 423s were answered`);
    const live = await s.db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED')`);
    assert.equal(Number(live[0]!.n), 0);
  });
});
