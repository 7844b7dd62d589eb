import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { eventually } from '../support/lock-app.js';
import { COUNTER_TABLE, counterDatabase, type CounterArgs, type CounterResult } from './scenarios/counter.js';
import type { HoldResult } from './scenarios/holders.js';
import { appliesTo, contractSuite } from '../support/contract-targets.js';

/**
 * One clock, the server's: a process whose Date runs an hour ahead (a preload replacing Date/Date.now)
 * behaves exactly like the others: exclusion holds, leases run out on the server's schedule (not
 * an hour early or late), and takeovers in both directions mark the old row EXPIRED.
 */
const SKEW_MS = 3_600_000;
const LEASE_MS = 1_000;
const POLL_MS = 200;
const EPSILON_MS = 400;
const SKEW_PRELOAD = new URL('../support/clock-skew.js', import.meta.url).href;
const COUNTER = new URL('./scenarios/counter.js', import.meta.url).href;
const HOLDERS = new URL('./scenarios/holders.js', import.meta.url).href;

contractSuite('server-clock', 'a process with its clock shifted by +1 h', { postgres: true }, (target) => {
  let db: TestDatabase;
  let skewed: LockWorker[] = [];
  let normal: LockWorker[] = [];
  before(async () => {
    db = await counterDatabase(target);
    const config = { settings: db.settings, options: target.options({ leaseMs: LEASE_MS, retryMaxDelayMs: POLL_MS }) };
    [skewed, normal] = await Promise.all([
      LockWorker.startMany(2, config, { execArgv: ['--import', SKEW_PRELOAD], env: { CLOCK_SKEW_MS: String(SKEW_MS) } }),
      LockWorker.startMany(2, config),
    ]);
  });
  after(async () => {
    await Promise.all([...skewed, ...normal].map((w) => w.close()));
    await db?.drop();
  });

  it('the preload really shifts the worker clock', async () => {
    const reading = await skewed[0]!.run<{ dateNow: number; newDate: number }>(COUNTER, 'clockReading');
    assert.ok(Math.abs(reading.dateNow - Date.now() - SKEW_MS) < 60_000, `skew ${reading.dateNow - Date.now()} ms`);
    assert.ok(Math.abs(reading.newDate - Date.now() - SKEW_MS) < 60_000);
    const plain = await normal[0]!.run<{ dateNow: number }>(COUNTER, 'clockReading');
    assert.ok(Math.abs(plain.dateNow - Date.now()) < 60_000);
  });

  it('exclusion holds between skewed and normal processes', async () => {
    await db.query(`INSERT INTO ${COUNTER_TABLE} (id, value) VALUES (1, 0)`);
    const args: CounterArgs = { key: 'skew-counter', counterId: 1, callers: 3, iterations: 25, locked: true, gapMs: 1, leaseMs: LEASE_MS };
    const results = await Promise.all([...skewed, ...normal].map((w) => w.run<CounterResult>(COUNTER, 'countUp', args)));
    const sections = results.reduce((n, r) => n + r.sections, 0);
    const [row] = await db.query<{ value: number }[]>(`SELECT value FROM ${COUNTER_TABLE} WHERE id = 1`);
    assert.equal(Number(row!.value), sections);
    assert.deepEqual(
      results.flatMap((r) => r.tokens).sort((a, b) => a - b),
      Array.from({ length: sections }, (_, i) => i + 1),
    );
    const rows = await db.logRows('skew-counter');
    assert.deepEqual(new Set(rows.map((r) => r.status)), new Set(['RELEASED']));
    assert.ok(
      skewed.every((w) => rows.some((r) => String(r.holder).endsWith(`:${w.pid}`))),
      'every skewed process took part',
    );
  });

  // Only a holder with a lease has an expiry to report (a row-lock holder has none: no lease to skew).
  if (target.capabilities.has('lease-expiry'))
    it('a skewed holder reports its lease in server time', async () => {
      const held = await skewed[0]!.run<HoldResult>(HOLDERS, 'acquireAndRelease', { key: 'skew-expiry', leaseMs: 5_000 });
      const [row] = await db.logRows('skew-expiry');
      assert.equal(held.expiresAt, (row!.expires_at as Date).getTime(), "expiresAt is the row's server-clock expiry");
      assert.ok(Math.abs(held.expiresAt - Date.now() - 5_000) < 5_000, "expiresAt is not shifted by the worker's clock");
    });

  for (const [label, holderIs, waiterIs] of [
    ['a SIGKILLed skewed holder is taken over by a normal process', 'skewed', 'normal'],
    ['a SIGKILLed normal holder is taken over by a skewed process', 'normal', 'skewed'],
  ] as const) {
    // A dead holder is taken over when its lease ends: a lease-strategy schedule (row-lock frees at once).
    if (appliesTo('lease-takeover', target))
      it(`${label} on the server's schedule`, async () => {
        const holder = (holderIs === 'skewed' ? skewed : normal).pop()!;
        const waiter = (waiterIs === 'skewed' ? skewed : normal)[0]!;
        const key = `skew-takeover-${holderIs}`;
        const held = await holder.run<HoldResult>(HOLDERS, 'acquireAndKeep', { key });
        assert.equal(held.fencingToken, 1);
        const [first] = await db.logRows(key);
        await eventually(
          async () => {
            const [row] = await db.logRows(key);
            return (row!.lease_ends_at as Date).getTime() > (first!.lease_ends_at as Date).getTime();
          },
          5_000,
          'a lease renewal by the holder',
        );

        const killedAt = performance.now();
        const taken = waiter.run<HoldResult>(HOLDERS, 'acquireAndRelease', { key, timeoutMs: 15_000 });
        await holder.kill();
        const [{ now: deadAt }] = (await db.query(`SELECT ${db.sql.utcNow} AS now`)) as [{ now: Date }];
        const result = await taken;
        const elapsed = performance.now() - killedAt;
        assert.equal(result.fencingToken, 2);

        const [dead, next] = (await db.logRows(key)) as [Record<string, unknown>, Record<string, unknown>];
        assert.equal(dead.status, 'EXPIRED');
        assert.ok(String(dead.note).endsWith(String(next.owner)));
        const deadExpiry = (dead.lease_ends_at as Date).getTime();
        const grantedAt = (next.acquired_at as Date).getTime();
        assert.ok(deadExpiry <= deadAt.getTime() + LEASE_MS, 'the lease was set an hour off');
        assert.ok(grantedAt >= deadExpiry, `taken over ${deadExpiry - grantedAt} ms before the lease ended`);
        assert.ok(grantedAt - deadExpiry <= POLL_MS + EPSILON_MS, `taken over ${grantedAt - deadExpiry} ms after the lease ended`);
        assert.ok(elapsed <= LEASE_MS + POLL_MS + EPSILON_MS, `waited ${Math.round(elapsed)} ms after the kill`);
      });
  }
});
