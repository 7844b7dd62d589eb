import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { semaphoreGrantPlan, semaphorePlan } from '../../lib/store/mysql/semaphore-grant.sql.js';
import { SemaphoreKey } from '../../lib/core/semaphore-request.js';
import { resolveTargets } from '../../lib/core/lock-key.js';

const input = (limit?: number) => ({
  acquisitionId: '00000000-0000-4000-8000-000000000000',
  holder: 'h:1',
  processId: '7',
  strategy: 'lease' as const,
  targets: limit === undefined ? resolveTargets('s', 'write', '') : [new SemaphoreKey('s', limit, 'test').target('')],
  leaseMs: 1000,
  waitedMs: 0,
  writerWaitMarkMs: 0,
  writerPreference: true,
});

/** The outcome row as the plan's read-back returns it, with the other statements' results before it. */
function answer(plan: ReturnType<typeof semaphoreGrantPlan>, row: Record<string, unknown>) {
  return [...plan.statements.slice(0, -2).map(() => ({ affectedRows: 0 })), [row], { affectedRows: 0 }];
}
const refused = { granted: 0, key_rows: 1, current_limit: 3, live: 3, locked: 0, busy: 3, expired: 0, reclaimed: 0, id: null };

describe('semaphore grant plan', () => {
  it('only a permit request takes it; the common path locks the key row first, takes nothing over, writes a permit row', () => {
    assert.equal(semaphorePlan(input(), false), undefined);
    const plan = semaphorePlan(input(3), false)!;
    assert.equal(plan.statements[0], 'START TRANSACTION');
    assert.match(plan.statements[1]!, /semaphore_limit.* FROM db_lock WHERE lock_key = .* FOR UPDATE$/);
    assert.ok(!plan.statements.some((s) => s.includes("'EXPIRED'")), 'no takeover on the common path');
    assert.ok(plan.statements.some((s) => /INSERT INTO db_lock_log .* 'permit'/.test(s)));
    assert.ok(semaphoreGrantPlan(input(3), 3, true).statements.some((s) => s.includes("SET g.status = 'EXPIRED'")));
  });

  it('parses granted, full, expired (common path only), another limit, lock holders and a missing key row', () => {
    const plan = semaphoreGrantPlan(input(3), 3, false);
    const granted = plan.parse(
      answer(plan, {
        ...refused,
        granted: 1,
        live: 1,
        busy: 1,
        id: 9,
        fencing_token: 12,
        expires_at: '2026-01-01 00:00:01.000000',
        waited_us: 0,
        started_at: '2026-01-01 00:00:00.000000',
      }),
    );
    assert.ok(granted.granted && granted.rows[0]!.fencingToken === 12 && granted.rows[0]!.id === '9');
    assert.deepEqual(plan.parse(answer(plan, refused)), { granted: false, reason: 'busy' });
    assert.deepEqual(plan.parse(answer(plan, { ...refused, busy: 2, expired: 1 })), { granted: false, reason: 'expired-holders' });
    const takeover = semaphoreGrantPlan(input(3), 3, true);
    assert.deepEqual(
      takeover.parse(answer(takeover, { ...refused, busy: 2, expired: 1 })),
      { granted: false, reason: 'busy' },
      'the takeover never asks for itself again',
    );
    const other = semaphoreGrantPlan(input(4), 4, false);
    assert.deepEqual(other.parse(answer(other, { ...refused, live: 1, busy: 1 })), { granted: false, reason: 'limit-mismatch', currentLimit: 3 });
    assert.deepEqual(
      other.parse(answer(other, { ...refused, live: 1, busy: 0, expired: 1 })),
      { granted: false, reason: 'expired-holders' },
      'expired permits are taken over before a new limit is judged',
    );
    assert.deepEqual(
      other.parse(answer(other, { ...refused, current_limit: null, live: 1, locked: 1, busy: 1 })),
      { granted: false, reason: 'busy' },
      'a lock holder: wait',
    );
    assert.deepEqual(plan.parse(answer(plan, { ...refused, key_rows: 0 })), { granted: false, reason: 'missing-key-rows' });
  });
});
