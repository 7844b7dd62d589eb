import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import request from 'supertest';
import { logRows, moneySnapshot, type SampleApp, startSampleApp } from '../support/sample-app.js';

/**
 * Every bad request to the sample app: the right status, and nothing changed. Bad input is refused
 * before any lock is taken (no log row); an unknown loan or a conflict is found under the lock,
 * so its log row ends FAILED and its transaction rolled back.
 */
describe('sample app: bad requests change nothing', () => {
  let s: SampleApp;

  before(async () => {
    s = await startSampleApp();
  });
  after(async () => {
    await s?.close();
  });

  /** Runs `send`, expects `status`, and checks that no money, claim or row changed. */
  async function unchanged(send: () => request.Test, status: number, lockRows: { prefix: string; added: string[] } = { prefix: 'p2p:', added: [] }) {
    const before = await moneySnapshot(s.db);
    const rowsBefore = await logRows(s.db, lockRows.prefix);
    const response = await send();
    assert.equal(response.status, status, JSON.stringify(response.body));
    assert.deepEqual(await moneySnapshot(s.db), before, 'balances, loans, claims and history unchanged');
    const added = (await logRows(s.db, lockRows.prefix)).slice(rowsBefore.length);
    assert.deepEqual(added.map((r) => `${r.key} ${r.mode} ${r.status}`), lockRows.added);
    return response;
  }

  const repay = (body?: unknown, path = '/loans/1/repay') => () => {
    const r = request(s.server).post(path);
    return body === undefined ? r : r.send(body as object);
  };

  for (const [name, body, message] of [
    ['a negative amount', { cents: -500 }, 'cents must not be less than 1'],
    ['zero', { cents: 0 }, 'cents must not be less than 1'],
    ['a fraction of a cent', { cents: 1.5 }, 'cents must be an integer number'],
    ['a string', { cents: 'abc' }, 'cents must be an integer number'],
    ['a numeric string (no coercion)', { cents: '500' }, 'cents must be an integer number'],
    ['a boolean', { cents: true }, 'cents must be an integer number'],
    ['null', { cents: null }, 'cents must be an integer number'],
    ['more than the upper bound', { cents: 100_000_001 }, 'cents must not be greater than 100000000'],
    ['an empty object', {}, 'cents must be an integer number'],
    ['an unknown property', { cents: 500, memo: 'x' }, 'property memo should not exist'],
    ['an array', [{ cents: 500 }], undefined],
  ] as const) {
    it(`repay with ${name} is a 400`, async () => {
      const response = await unchanged(repay(body), 400);
      if (message) assert.ok((response.body.message as string[]).includes(message), JSON.stringify(response.body));
    });
  }

  it('repay with no body at all is a 400, and nothing is repaid', async () => {
    await unchanged(repay(undefined), 400);
    await unchanged(() => request(s.server).post('/loans/1/repay').set('content-type', 'application/json'), 400);
  });

  it('repay with malformed JSON is a 400', async () => {
    await unchanged(() => request(s.server).post('/loans/1/repay').set('content-type', 'application/json').send('{"cents": 5'), 400);
  });

  for (const id of ['abc', '1.5', '0', '-1', '1e3', '0x10', '2147483648', '99999999999'])
    it(`a loan id of '${id}' in the path is a 400`, async () => {
      await unchanged(repay({ cents: 500 }, `/loans/${encodeURIComponent(id)}/repay`), 400);
      assert.equal((await request(s.server).get(`/loans/${encodeURIComponent(id)}`)).status, 400);
    });

  it('an unknown loan is a 404 thrown under the lock: its row ends FAILED, nothing else changes', async () => {
    const response = await unchanged(repay({ cents: 500 }, '/loans/999/repay'), 404, { prefix: 'p2p:loan:999', added: ['p2p:loan:999 write FAILED'] });
    assert.equal(response.body.message, 'Loan 999 not found');
    assert.equal((await request(s.server).get('/loans/999')).status, 404);
  });

  it('repaying more than is outstanding is a 409: rolled back, row FAILED', async () => {
    const response = await unchanged(repay({ cents: 100_000_000 }, '/loans/4/repay'), 409, { prefix: 'p2p:loan:4', added: ['p2p:loan:4 write FAILED'] });
    assert.match(response.body.message as string, /outstanding/);
  });

  const transfer = (loanId: number | string, claimId: number | string, body?: unknown) => () => {
    const r = request(s.server).post(`/loans/${loanId}/claims/${claimId}/transfer`);
    return body === undefined ? r : r.send(body as object);
  };

  it('selling a claim to the investor who holds it is a 409 (decided under the lock)', async () => {
    // Claim 1 (loan 1) belongs to investor 1.
    const response = await unchanged(transfer(1, 1, { buyerId: 1 }), 409, {
      prefix: 'p2p:',
      added: ['p2p:claim:1 write FAILED', 'p2p:loan:1 read FAILED'],
    });
    assert.equal(response.body.message, 'Investor 1 already holds claim 1');
  });

  it('a claim of another loan, an unknown claim or an unknown buyer is a 404', async () => {
    const failed = (claim: number, loan: number) => ({ prefix: 'p2p:', added: [`p2p:claim:${claim} write FAILED`, `p2p:loan:${loan} read FAILED`] });
    assert.equal((await unchanged(transfer(2, 1, { buyerId: 3 }), 404, failed(1, 2))).body.message, 'Loan 2 has no claim 1');
    assert.equal((await unchanged(transfer(1, 999, { buyerId: 3 }), 404, failed(999, 1))).body.message, 'Loan 1 has no claim 999');
    assert.equal((await unchanged(transfer(1, 1, { buyerId: 999 }), 404, failed(1, 1))).body.message, 'Investor 999 not found');
  });

  for (const [name, body] of [
    ['no body', undefined],
    ['a string buyer id', { buyerId: '3' }],
    ['a fractional buyer id', { buyerId: 2.5 }],
    ['buyer id 0', { buyerId: 0 }],
    ['an unknown property', { buyerId: 3, price: 10 }],
  ] as const)
    it(`a transfer with ${name} is a 400`, async () => {
      await unchanged(transfer(1, 1, body), 400);
    });

  it('bad ids in a transfer path are a 400', async () => {
    await unchanged(transfer('x', 1, { buyerId: 3 }), 400);
    await unchanged(transfer(1, '1.5', { buyerId: 3 }), 400);
  });

  for (const query of ['limit=0', 'limit=501', 'limit=abc', 'limit=2.5', 'limit=', 'other=1'])
    it(`GET /locks/log?${query} is a 400`, async () => {
      assert.equal((await request(s.server).get(`/locks/log?${query}`)).status, 400);
    });

  for (const query of ['limit=0', 'limit=1001', 'after=abc', 'after=-1'])
    it(`GET /locks?${query} is a 400`, async () => {
      assert.equal((await request(s.server).get(`/locks?${query}`)).status, 400);
    });
});
