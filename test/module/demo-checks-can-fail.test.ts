import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import request from 'supertest';
import { type SampleApp, startSampleApp } from '../support/sample-app.js';
import { expectedAnswers, moneyConserved, noOverlap, nothingLeftHeld, ownershipChains, uniqueOrderNumbers } from '../../sample-app/demo/checks.js';
import type { Outcome } from '../../sample-app/demo/load.js';

/**
 * Every verdict of `npm run demo` (sample-app/demo/checks.ts) can fail. A real
 * run of a few requests passes all six; then each guarantee is broken by hand in the database (or
 * in the answers) the way a bug would break it, and the check naming it must say FAIL.
 */
describe('the demo checks are real (each fails when its guarantee is broken)', () => {
  let s: SampleApp;
  const outcomes: Outcome[] = [];

  async function send(kind: Outcome['kind'], method: 'get' | 'post', path: string, body?: object): Promise<void> {
    const r =
      method === 'get'
        ? await request(s.server).get(path)
        : await request(s.server)
            .post(path)
            .send(body ?? {});
    outcomes.push({
      kind,
      instance: 0,
      status: r.status,
      body: r.body as Record<string, unknown>,
      ...(r.body?.error ? { error: r.body.error } : {}),
    });
  }

  before(async () => {
    s = await startSampleApp();
    await Promise.all([
      send('repay', 'post', '/loans/1/repay', { cents: 500 }),
      send('repay', 'post', '/loans/1/repay', { cents: 700 }),
      send('repay', 'post', '/loans/2/repay', { cents: 300 }),
      send('transfer', 'post', '/loans/1/claims/1/transfer', { buyerId: 5 }),
      send('transfer', 'post', '/loans/1/claims/2/transfer', { buyerId: 6 }),
      send('statement', 'get', '/loans/1'),
      send('order', 'post', '/orders'),
      send('order', 'post', '/orders'),
    ]);
    await send('transfer', 'post', '/loans/1/claims/1/transfer', { buyerId: 7 });
  });
  after(async () => {
    await s?.close();
  });

  const db = () => s.db.admin;

  /** Runs `tamper` inside a transaction of the admin connection, runs `check`, rolls back. */
  async function broken<T>(tamper: string[], check: () => Promise<T>): Promise<T> {
    await db().query('START TRANSACTION');
    try {
      for (const sql of tamper) await db().query(sql);
      return await check();
    } finally {
      await db().query('ROLLBACK');
    }
  }

  let token = 1000;
  const logRow = (key: string, mode: string, status: string, fromUs: number, toUs: number | null) =>
    `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at)
     VALUES ('${key}', '${mode}', UUID(), 'x:1', ${token++}, '${status}', 10000, '2030-01-01' + INTERVAL ${fromUs} MICROSECOND,
             '2030-01-01' + INTERVAL ${fromUs + 10_000_000} MICROSECOND, ${toUs === null ? 'NULL' : `'2030-01-01' + INTERVAL ${toUs} MICROSECOND`})`;

  it('all six pass on an honest run', async () => {
    const checks = [
      await moneyConserved(db(), outcomes),
      await ownershipChains(db(), outcomes),
      await noOverlap(db()),
      await uniqueOrderNumbers(db(), outcomes),
      expectedAnswers(outcomes),
      await nothingLeftHeld(db()),
    ];
    for (const c of checks) assert.ok(c.ok, `${c.name}: ${c.detail}`);
  });

  it('money conserved fails on a lost update of a loan, an unacknowledged repayment row, or a payout to nobody', async () => {
    const lost = await broken(
      ['UPDATE p2p_loan SET repaid_cents = repaid_cents - 500, outstanding_cents = outstanding_cents + 500 WHERE id = 1'],
      () => moneyConserved(db(), outcomes),
    );
    assert.equal(lost.ok, false, lost.detail);
    const extra = await broken(['INSERT INTO p2p_repayment (loan_id, cents, fencing_token) VALUES (1, 0, 99)'], () => moneyConserved(db(), outcomes));
    assert.equal(extra.ok, false, `a repayment row nobody was told about: ${extra.detail}`);
    const paid = await broken(['UPDATE p2p_investor SET balance_cents = balance_cents + 1 WHERE id = 3'], () => moneyConserved(db(), outcomes));
    assert.equal(paid.ok, false, paid.detail);
    const told = outcomes.map((o) => (o.kind === 'repay' ? { ...o, status: 423 } : o));
    assert.equal((await moneyConserved(db(), told)).ok, false, 'repayments committed though answered 423');
  });

  it('claim sales serialised fails on two sales from the same owner (interleaved), or an unacknowledged sale', async () => {
    const [first] = (await db().query(
      'SELECT from_investor_id AS f, fencing_token AS t FROM p2p_claim_transfer WHERE claim_id = 1 ORDER BY fencing_token LIMIT 1',
    )) as unknown as [{ f: number; t: number }[]];
    const twice = await broken(
      [
        `INSERT INTO p2p_claim_transfer (claim_id, loan_id, from_investor_id, to_investor_id, fencing_token) VALUES (1, 1, ${first[0]!.f}, 8, ${Number(first[0]!.t) + 1000})`,
      ],
      () => ownershipChains(db(), outcomes),
    );
    assert.equal(twice.ok, false, twice.detail);
    const fewer = await ownershipChains(
      db(),
      outcomes.filter((o, i) => !(o.kind === 'transfer' && i === outcomes.findIndex((x) => x.kind === 'transfer'))),
    );
    assert.equal(fewer.ok, false, fewer.detail);
  });

  it('exclusion fails on a write overlapping a write, a read inside a write, a write inside a read, equal starts', async () => {
    for (const [name, rows] of [
      ['write/write', [logRow('p2p:loan:9', 'write', 'RELEASED', 0, 1000), logRow('p2p:loan:9', 'write', 'RELEASED', 999, 2000)]],
      ['read inside write', [logRow('p2p:loan:9', 'write', 'RELEASED', 0, 1000), logRow('p2p:loan:9', 'read', 'FAILED', 10, 20)]],
      ['write inside read', [logRow('p2p:loan:9', 'read', 'RELEASED', 0, 1000), logRow('p2p:loan:9', 'write', 'RELEASED', 10, 20)]],
      [
        'write after a long read and a short one',
        [
          logRow('p2p:loan:9', 'read', 'RELEASED', 0, 1000),
          logRow('p2p:loan:9', 'read', 'RELEASED', 5, 6),
          logRow('p2p:loan:9', 'write', 'RELEASED', 500, 600),
        ],
      ],
      ['equal starts', [logRow('p2p:loan:9', 'read', 'RELEASED', 0, 5), logRow('p2p:loan:9', 'write', 'RELEASED', 0, 10)]],
    ] as const) {
      const c = await broken([...rows], () => noOverlap(db()));
      assert.equal(c.ok, false, `${name}: ${c.detail}`);
    }
    const readers = await broken([logRow('p2p:loan:9', 'read', 'RELEASED', 0, 1000), logRow('p2p:loan:9', 'read', 'RELEASED', 10, 20)], () =>
      noOverlap(db()),
    );
    assert.equal(readers.ok, true, `readers may overlap: ${readers.detail}`);
  });

  it('order numbers unique fails on a number handed out twice or a stored one nobody got', async () => {
    const first = outcomes.find((o) => o.kind === 'order')!;
    const dup = await uniqueOrderNumbers(db(), [...outcomes, { ...first }]);
    assert.equal(dup.ok, false, dup.detail);
    const stored = await broken(["INSERT INTO p2p_order (order_number, fencing_token) VALUES ('ORD-X', 1)"], () =>
      uniqueOrderNumbers(db(), outcomes),
    );
    assert.equal(stored.ok, false, stored.detail);
  });

  it('answers as documented fails on a 500, a dropped connection, a 400, a statement 409', async () => {
    for (const bad of [
      { kind: 'repay', status: 500 },
      { kind: 'transfer', status: 0 },
      { kind: 'order', status: 400 },
      { kind: 'statement', status: 409 },
    ] as const)
      assert.equal(expectedAnswers([...outcomes, { ...bad, instance: 0, body: {} }]).ok, false, JSON.stringify(bad));
  });

  it('nothing left held fails on an ACQUIRED or COMPLETED row', async () => {
    for (const status of ['ACQUIRED', 'COMPLETED']) {
      const c = await broken([logRow('p2p:loan:9', 'write', status, 0, null)], () => nothingLeftHeld(db()));
      assert.equal(c.ok, false, `${status}: ${c.detail}`);
    }
  });
});
