import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import request from 'supertest';
import { splitProRata } from '../../sample-app/lending/pro-rata.js';
import { OPENING_CENTS, SEED_CLAIMS, SEED_LOANS } from '../../sample-app/lending/seed-data.js';
import { balances, logRows, type SampleApp, startSampleApp, writeOverlaps } from '../support/sample-app.js';

/** The sample app's happy paths, on its own fresh database, asserted on balances and lock log rows. */
describe('sample app: repayments, transfers, order numbers, lock views', () => {
  let s: SampleApp;

  before(async () => {
    s = await startSampleApp();
  });
  after(async () => {
    await s?.close();
  });

  it('a repayment pays each claim owner pro rata, under the loan write lock, and logs one RELEASED row', async () => {
    const before = await balances(s.db);
    const response = await request(s.server).post('/loans/3/repay').send({ cents: 1001 });
    assert.equal(response.status, 201, JSON.stringify(response.body));

    const claims = SEED_CLAIMS.filter((c) => c.loanId === 3);
    const shares = splitProRata(1001, claims.map((c) => c.principalCents));
    assert.equal(shares.reduce((a, b) => a + b, 0), 1001);
    const after = await balances(s.db);
    for (const [i, claim] of claims.entries())
      assert.equal(after.get(claim.investorId)! - before.get(claim.investorId)!, shares[i], `investor ${claim.investorId}`);

    const [loan] = await s.db.query<Record<string, string>[]>('SELECT * FROM p2p_loan WHERE id = 3');
    assert.equal(Number(loan!.outstanding_cents), SEED_LOANS[2]!.principalCents - 1001);
    assert.equal(Number(loan!.repaid_cents), 1001);
    assert.equal(response.body.outstandingCents, SEED_LOANS[2]!.principalCents - 1001);

    const rows = await logRows(s.db, 'p2p:loan:3');
    assert.equal(rows.length, 1);
    assert.deepEqual([rows[0]!.mode, rows[0]!.status], ['write', 'RELEASED']);
    const [repayment] = await s.db.query<Record<string, string>[]>('SELECT * FROM p2p_repayment WHERE loan_id = 3');
    assert.equal(Number(repayment!.fencing_token), rows[0]!.fencingToken, 'the repayment row carries its lock fencing token');
    assert.equal(response.body.fencingToken, rows[0]!.fencingToken);
  });

  it('20 concurrent repayments of one loan all apply, one at a time (no overlap by server time)', async () => {
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => request(s.server).post('/loans/1/repay').send({ cents: 100 + i })));
    for (const r of responses) assert.equal(r.status, 201, JSON.stringify(r.body));
    const total = responses.reduce((sum, r) => sum + (r.body as { cents: number }).cents, 0);

    const [loan] = await s.db.query<Record<string, string>[]>('SELECT * FROM p2p_loan WHERE id = 1');
    assert.equal(Number(loan!.repaid_cents), total);
    assert.equal(Number(loan!.outstanding_cents) + Number(loan!.repaid_cents), SEED_LOANS[0]!.principalCents);
    assert.equal(Number(loan!.repayments), 20);
    const [claims] = await s.db.query<Record<string, string>[]>('SELECT SUM(received_cents) AS r FROM p2p_claim WHERE loan_id = 1');
    assert.equal(Number(claims!.r), total);

    const rows = await logRows(s.db, 'p2p:loan:1');
    assert.equal(rows.length, 20);
    assert.deepEqual(new Set(rows.map((r) => r.status)), new Set(['RELEASED']));
    assert.deepEqual(rows.map((r) => r.fencingToken).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1));
    assert.deepEqual(writeOverlaps(rows), []);
    // Repayments commit in lock order: their fencing tokens grow with their row ids.
    const tokens = (await s.db.query<{ t: string }[]>('SELECT fencing_token AS t FROM p2p_repayment WHERE loan_id = 1 ORDER BY id')).map((r) => Number(r.t));
    assert.deepEqual(tokens, [...tokens].sort((a, b) => a - b));
  });

  it('concurrent sales of one claim serialise: the owner chain is unbroken and no money moves', async () => {
    const claim = SEED_CLAIMS.find((c) => c.id === 5)!; // loan 2, held by investor 2
    const buyers = [1, 3, 4, 5, 6, 7, 8];
    const before = await balances(s.db);
    const responses = await Promise.all(buyers.map((buyerId) => request(s.server).post(`/loans/2/claims/5/transfer`).send({ buyerId })));
    for (const r of responses) assert.equal(r.status, 201, JSON.stringify(r.body));

    const chain = await s.db.query<Record<string, string>[]>('SELECT * FROM p2p_claim_transfer WHERE claim_id = 5 ORDER BY fencing_token');
    assert.equal(chain.length, buyers.length);
    let owner = claim.investorId;
    for (const link of chain) {
      assert.equal(Number(link.from_investor_id), owner, 'each sale starts from the previous buyer');
      owner = Number(link.to_investor_id);
    }
    const [row] = await s.db.query<Record<string, string>[]>('SELECT investor_id, transfers FROM p2p_claim WHERE id = 5');
    assert.equal(Number(row!.investor_id), owner);
    assert.equal(Number(row!.transfers), buyers.length);
    assert.deepEqual(await balances(s.db), before);

    const claimRows = await logRows(s.db, 'p2p:claim:5');
    const loanRows = await logRows(s.db, 'p2p:loan:2');
    assert.deepEqual(claimRows.map((r) => `${r.mode} ${r.status}`), buyers.map(() => 'write RELEASED'));
    assert.deepEqual(loanRows.map((r) => `${r.mode} ${r.status}`), buyers.map(() => 'read RELEASED'));
    assert.deepEqual(writeOverlaps(claimRows), []);
  });

  it('GET /loans/:id returns the loan with claims that add up to it', async () => {
    const response = await request(s.server).get('/loans/1');
    assert.equal(response.status, 200);
    const body = response.body as { repaidCents: number; claims: { receivedCents: number }[] };
    assert.equal(body.claims.length, SEED_CLAIMS.filter((c) => c.loanId === 1).length);
    assert.equal(body.claims.reduce((sum, c) => sum + c.receivedCents, 0), body.repaidCents);
    const investors = await request(s.server).get('/investors');
    assert.equal(investors.status, 200);
    assert.equal((investors.body as { openingCents: number }[])[0]!.openingCents, OPENING_CENTS);
  });

  it('30 concurrent order numbers are consecutive and unique, each written under the day counter lock', async () => {
    const responses = await Promise.all(Array.from({ length: 30 }, () => request(s.server).post('/orders')));
    for (const r of responses) assert.equal(r.status, 201, JSON.stringify(r.body));
    const numbers = responses.map((r) => (r.body as { orderNumber: string }).orderNumber);
    assert.equal(new Set(numbers).size, 30);
    const [{ day }] = await s.db.query<[{ day: string }]>(`SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y%m%d') AS day`);
    const expected = Array.from({ length: 30 }, (_, i) => `ORD-${day}-${String(i + 1).padStart(6, '0')}`);
    assert.deepEqual([...numbers].sort(), expected);

    const stored = await s.db.query<{ order_number: string }[]>('SELECT order_number FROM p2p_order ORDER BY order_number');
    assert.deepEqual(stored.map((r) => r.order_number), expected);
    const rows = await logRows(s.db, `p2p:order-counter:${day}`);
    assert.equal(rows.length, 30);
    assert.deepEqual(new Set(rows.map((r) => r.status)), new Set(['RELEASED']));
    const [counter] = await s.db.query<Record<string, string>[]>('SELECT * FROM p2p_order_counter WHERE day = ?', [day]);
    assert.equal(Number(counter!.last_value), 30);
    assert.equal(Number(counter!.fencing_token), Math.max(...rows.map((r) => r.fencingToken)));
  });

  it('GET /locks lists the locks held right now, page by page', async () => {
    const empty = await request(s.server).get('/locks');
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body.locks, []);

    const reader = await s.locks.acquire([{ key: 'loan:4', mode: 'read' }]);
    const writer = await s.locks.acquire('claim:14');
    try {
      const page1 = await request(s.server).get('/locks?limit=1');
      assert.equal(page1.status, 200);
      assert.equal(page1.body.locks.length, 1);
      assert.deepEqual([page1.body.locks[0].key, page1.body.locks[0].mode], ['loan:4', 'read']);
      assert.ok(page1.body.next);
      const page2 = await request(s.server).get(`/locks?limit=1&after=${page1.body.next}`);
      assert.deepEqual([page2.body.locks[0].key, page2.body.locks[0].mode, page2.body.next], ['claim:14', 'write', null]);
      const inspect = await request(s.server).get('/loans/4/lock');
      assert.deepEqual([inspect.body.mode, inspect.body.holders.length], ['read', 1]);
    } finally {
      await reader.release();
      await writer.release();
    }
    assert.deepEqual((await request(s.server).get('/locks')).body.locks, []);
  });

  it('GET /locks/log?limit=N returns the newest N log rows, newest first, as stored', async () => {
    const response = await request(s.server).get('/locks/log?limit=5');
    assert.equal(response.status, 200);
    const rows = response.body as { id: number; key: string; status: string; fencingToken: number; endedAt: string }[];
    const stored = await s.db.query<Record<string, unknown>[]>('SELECT id, CAST(lock_key AS CHAR) AS k, status, fencing_token FROM db_lock_log ORDER BY id DESC LIMIT 5');
    assert.deepEqual(
      rows.map((r) => [r.id, r.key, r.status, r.fencingToken]),
      stored.map((r) => [Number(r.id), r.k, r.status, Number(r.fencing_token)]),
    );
    // The app's newest holds (the library's janitor may have logged its own, non-'p2p:' key since).
    assert.deepEqual(rows.map((r) => r.key).filter((k) => k.startsWith('p2p:')).slice(0, 2), ['p2p:claim:14', 'p2p:loan:4']);
    assert.ok(rows.every((r) => r.status === 'RELEASED' && typeof r.endedAt === 'string'));
    const fifty = await request(s.server).get('/locks/log');
    assert.equal(fifty.body.length, 50, 'default limit');
    const stats = await request(s.server).get('/locks/stats');
    assert.equal(stats.status, 200);
    assert.ok(stats.body.acquired >= 60 && stats.body.held === 0, JSON.stringify(stats.body));
  });
});
