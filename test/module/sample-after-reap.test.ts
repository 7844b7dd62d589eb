import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import request from 'supertest';
import { readSampleConfig } from '../../sample-app/config/sample-config.js';
import { createSampleApp } from '../../sample-app/create-app.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { type SampleApp, startSampleApp } from '../support/sample-app.js';
import { serverUrl } from '../support/test-database.js';

/**
 * The sample's hand-made fence on the order counter (`fencing_token < ?`) and
 * the claim-transfer history ordered by fencing token both rely on tokens that keep growing when
 * the janitor reaps an idle key row ("Fencing tokens keep growing across a reap"). An instance
 * hands out orders and sells a claim, stops; two hours pass (simulated: the lock tables' server
 * timestamps are moved back); another node's janitor reaps the idle key rows; a fresh instance
 * then must go on: next order number (not a 409 for the rest of the day), larger tokens.
 */
describe('sample order counter and claim history across a janitor reap', () => {
  let s: SampleApp;
  let janitorApp: INestApplicationContext | undefined;
  let second: INestApplication | undefined;

  before(async () => {
    s = await startSampleApp();
  });
  after(async () => {
    await second?.close();
    await janitorApp?.close();
    await s?.close();
  });

  it('orders and claim sales keep working, with larger tokens, after their key rows were reaped', async () => {
    const [{ day }] = await s.db.query<[{ day: string }]>(`SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y%m%d') AS day`);
    const o1 = await request(s.server).post('/orders');
    const o2 = await request(s.server).post('/orders');
    assert.deepEqual([o1.status, o2.status], [201, 201]);
    const t1 = await request(s.server).post('/loans/4/claims/13/transfer').send({ buyerId: 1 });
    const t2 = await request(s.server).post('/loans/4/claims/13/transfer').send({ buyerId: 2 });
    assert.deepEqual([t1.status, t2.status], [201, 201]);
    await s.app.close(); // the first instance stops (its database stays)

    // Two hours pass with nothing held.
    await s.db.query(
      `UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 2 HOUR, expires_at = expires_at - INTERVAL 2 HOUR, ended_at = ended_at - INTERVAL 2 HOUR`,
    );
    await s.db.query(`UPDATE db_lock SET last_granted_at = last_granted_at - INTERVAL 2 HOUR WHERE last_granted_at IS NOT NULL`);

    const keyRows = async () =>
      Number(
        (
          await s.db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock WHERE lock_key IN (?, ?)`, [
            Buffer.from(`p2p:order-counter:${day}`),
            Buffer.from('p2p:claim:13'),
          ])
        )[0]!.n,
      );
    assert.equal(await keyRows(), 2);
    const other = await createLockApp(s.db.settings, { namespace: 'p2p', janitor: { intervalMs: 200, idleKeyMs: 60_000 } });
    janitorApp = other.app;
    await eventually(async () => (await keyRows()) === 0, 15_000, 'the janitor to reap both idle key rows').catch(async (e: Error) => {
      const rows = await s.db.query('SELECT CAST(lock_key AS CHAR) AS k, fencing_token, last_granted_at, UTC_TIMESTAMP(6) AS now FROM db_lock');
      throw new Error(`${e.message}: janitor ${JSON.stringify(other.locks.stats().janitor)}; key rows ${JSON.stringify(rows)}`);
    });
    await janitorApp.close();
    janitorApp = undefined;

    const url = serverUrl();
    url.pathname = `/${s.db.name}`;
    second = await createSampleApp(readSampleConfig({ DB_LOCK_SAMPLE_URL: url.href }), ['error']);
    await second.init();
    await second.get(SchedulerRegistry).getCronJob('reconciliation').stop();
    const server = second.getHttpServer();

    const o3 = await request(server).post('/orders');
    assert.equal(o3.status, 201, `an order after the reap: ${JSON.stringify(o3.body)}`);
    assert.equal(o3.body.orderNumber, `ORD-${day}-000003`);
    assert.ok(o3.body.fencingToken > o2.body.fencingToken, `order token after the reap ${o3.body.fencingToken} > ${o2.body.fencingToken}`);

    const t3 = await request(server).post('/loans/4/claims/13/transfer').send({ buyerId: 3 });
    assert.equal(t3.status, 201, JSON.stringify(t3.body));
    assert.ok(t3.body.fencingToken > t2.body.fencingToken, `claim token after the reap ${t3.body.fencingToken} > ${t2.body.fencingToken}`);
    const chain = await s.db.query<{ f: number; t: number }[]>(
      'SELECT from_investor_id AS f, to_investor_id AS t FROM p2p_claim_transfer WHERE claim_id = 13 ORDER BY fencing_token',
    );
    assert.deepEqual(
      chain.map((r) => [r.f, r.t]),
      [
        [5, 1],
        [1, 2],
        [2, 3],
      ],
      'the history in token order is the chain of owners',
    );
  });
});
