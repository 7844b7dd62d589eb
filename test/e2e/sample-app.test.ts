import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { TestDatabase, serverUrl } from '../support/test-database.js';

/** The sample app as users run it, on a fresh database: concurrent repayments of one loan serialise. */
describe('sample app', () => {
  let db: TestDatabase;
  let app: INestApplication;

  before(async () => {
    db = await TestDatabase.create('dblock_sample');
    const url = serverUrl();
    url.pathname = `/${db.name}`;
    process.env.DB_LOCK_SAMPLE_URL = url.href; // read when sample-config loads
    const { NestFactory } = await import('@nestjs/core');
    const { AppModule } = await import('../../sample-app/app.module.js');
    app = await NestFactory.create(AppModule, { logger: ['error'] });
    await app.init();
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('20 concurrent repayments of loan 1 all apply, one at a time, each with its own log row', async () => {
    const server = app.getHttpServer();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => request(server).post('/loans/1/repay').send({ cents: 100 })),
    );
    for (const response of responses) assert.equal(response.status, 201, JSON.stringify(response.body));
    const [loan] = await db.query<{ balance: string; repayments: number }[]>('SELECT balance, repayments FROM sample_loan WHERE id = 1');
    assert.equal(Number(loan!.balance), 100000 - 20 * 100);
    assert.equal(loan!.repayments, 20);
    const rows = await db.logRows('sample:loan:1');
    assert.equal(rows.length, 20);
    assert.deepEqual(new Set(rows.map((r) => r.status)), new Set(['RELEASED']));
    assert.deepEqual(rows.map((r) => Number(r.fencing_token)), Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('reports who holds a loan and maps a held lock to 423 Locked', async () => {
    const server = app.getHttpServer();
    const { LockService } = await import('../../lib/index.js');
    const locks = app.get(LockService);
    const held = await locks.acquire('loan:2');
    try {
      const info = await request(server).get('/loans/2/lock');
      assert.equal(info.body.mode, 'write');
      assert.equal(info.body.holders.length, 1);
      const blocked = await request(server).post('/loans/2/repay').send({ cents: 1 });
      assert.equal(blocked.status, 423);
      assert.equal(blocked.body.error, 'LockTimeoutError');
    } finally {
      await held.release();
    }
  });
});
