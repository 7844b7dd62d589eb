import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { leanGrantPlan, takeoverGrantPlan } from '../../lib/store/mysql/grant.sql.js';
import { singleKeyGrantPlan } from '../../lib/store/mysql/single-key-grant.sql.js';
import { resolveTargets } from '../../lib/core/lock-key.js';

const input = (keys: (string | { key: string; mode: 'read' | 'write' })[], extra: Record<string, unknown> = {}) => ({
  acquisitionId: '00000000-0000-4000-8000-000000000000',
  holder: 'h:1',
  processId: '7',
  strategy: 'lease' as const,
  targets: resolveTargets(keys, 'write', ''),
  leaseMs: 1000,
  waitedMs: 0,
  writerWaitMarkMs: 0,
  writerPreference: true,
  ...extra,
});

describe('grant plans', () => {
  it('the common grant is one transaction of seven statements, the outcome parsed beside it', () => {
    const plan = leanGrantPlan(input(['a']));
    assert.equal(plan.statements.length, 7);
    assert.equal(plan.statements[0], 'START TRANSACTION');
    assert.equal(plan.statements.at(-1), 'COMMIT');
    assert.match(plan.statements[1]!, /FROM db_lock WHERE lock_key IN \(.*\) FOR UPDATE$/);
    assert.ok(!plan.statements.some((s) => s.includes("'EXPIRED'")), 'no takeover work on the common path');
    const granted = plan.parse([
      ...plan.statements.slice(0, -2).map(() => ({ affectedRows: 0 })),
      [
        {
          granted: 1,
          key_rows: 1,
          busy: 0,
          expired: 0,
          writer_waiting: 0,
          reclaimed: 0,
          id: 5,
          lock_key: Buffer.from('a'),
          fencing_token: 3,
          expires_at: '2026-01-01 00:00:01.000000',
          waited_us: 2500,
          started_at: '2026-01-01 00:00:00.997500',
        },
      ],
      { affectedRows: 0 },
    ]);
    assert.deepEqual(granted, {
      granted: true,
      rows: [{ id: '5', storedKey: 'a', fencingToken: 3, expiresAt: new Date('2026-01-01T00:00:01.000Z') }],
      reclaimed: 0,
      serverWaitMs: 2.5,
      serverStartedAt: new Date('2026-01-01T00:00:00.997Z'),
    });
  });

  for (const [summary, reason] of [
    [{ granted: 0, key_rows: 0, busy: 0, expired: 0, writer_waiting: 0 }, 'missing-key-rows'],
    [{ granted: 0, key_rows: 1, busy: 1, expired: 0, writer_waiting: 0 }, 'busy'],
    [{ granted: 0, key_rows: 1, busy: 0, expired: 0, writer_waiting: 1 }, 'writer-waiting'],
    [{ granted: 0, key_rows: 1, busy: 0, expired: 2, writer_waiting: 0 }, 'expired-holders'],
  ] as const) {
    it(`reports '${reason}' so that only the rare work it needs is sent next`, () => {
      const plan = leanGrantPlan(input(['a']));
      const results = plan.statements.map(() => ({ affectedRows: 0 }) as unknown);
      results[plan.statements.length - 2] = [{ ...summary, id: null }];
      assert.deepEqual(plan.parse(results), { granted: false, reason });
    });
  }

  it('a single key is granted in five statements: the conditional UPDATE decides, the INSERT follows only if it matched', () => {
    const plan = singleKeyGrantPlan(input(['a']));
    assert.deepEqual(
      plan.statements.map((s) => s.split(' ')[0]),
      ['START', 'UPDATE', 'INSERT', 'SELECT', 'SELECT', 'COMMIT'],
    );
    assert.match(
      plan.statements[1]!,
      /SET fencing_token = LAST_INSERT_ID\(fencing_token \+ 1\).* WHERE lock_key = .* AND NOT EXISTS \(SELECT 1 FROM db_lock_log g WHERE g.lock_key = .* AND g.lock_key = db_lock.lock_key\)/,
    );
    assert.match(plan.statements[2]!, /LAST_INSERT_ID\(\), 'ACQUIRED'.* FROM DUAL WHERE ROW_COUNT\(\) = 1$/);
    assert.match(
      plan.statements[3]!,
      /WHERE k.lock_key = .* AND ROW_COUNT\(\) = 0 GROUP BY k.lock_key$/,
      'the diagnosis yields a row only if nothing was inserted',
    );
    assert.equal(plan.statements[4], 'SELECT expires_at FROM db_lock_log WHERE id = LAST_INSERT_ID()');
    assert.ok(!plan.statements.some((s) => /FOR UPDATE|EXPIRED/.test(s)), 'no locking read, no takeover work');
    // Granted: the token and the row id come in the OK packets, the lease end in the one row read; no diagnosis row.
    const row = { expires_at: '2026-01-01 00:00:01.000000' };
    assert.deepEqual(plan.parse([{}, { affectedRows: 1, insertId: 3 }, { affectedRows: 1, insertId: 5 }, [], [row], {}]), {
      granted: true,
      rows: [{ id: '5', storedKey: 'a', fencingToken: 3, expiresAt: new Date('2026-01-01T00:00:01.000Z') }],
      reclaimed: 0,
      serverWaitMs: 0,
    });
    // Refused: the row read is an earlier grant's or none, and ignored; why comes in the diagnosis row.
    const refused = { writer_waiting: 0, busy: 0, expired: 1 };
    const answer = (why: object[]) => plan.parse([{}, { affectedRows: 0, insertId: 0 }, { affectedRows: 0, insertId: 0 }, why, [row], {}]);
    assert.deepEqual(answer([refused]), { granted: false, reason: 'expired-holders' });
    assert.deepEqual(answer([]), { granted: false, reason: 'missing-key-rows' });
    assert.deepEqual(answer([{ ...refused, busy: '1' }]), { granted: false, reason: 'busy' });
    assert.deepEqual(answer([{ ...refused, expired: 0, writer_waiting: 1 }]), { granted: false, reason: 'writer-waiting' });
  });

  it('a waiting writer refused marks the key in the same transaction, only if refused', () => {
    const statements = singleKeyGrantPlan(input(['a'], { writerWaitMarkMs: 1000 })).statements;
    assert.equal(statements.length, 7);
    assert.match(
      statements[4]!,
      /^UPDATE db_lock SET writer_waiting_until = .* WHERE lock_key = .* AND NOT EXISTS \(SELECT 1 FROM db_lock_log WHERE id = LAST_INSERT_ID\(\) AND owner = /,
    );
    const reader = singleKeyGrantPlan(input([{ key: 'a', mode: 'read' }])).statements[1]!;
    assert.match(
      reader,
      /g.mode <> 'read' AND g.lock_key = db_lock.lock_key\) AND \(writer_waiting_until IS NULL OR writer_waiting_until <= UTC_TIMESTAMP\(6\)\)$/,
    );
  });

  it('the takeover marks expired holders EXPIRED and recounts before its own rows exist', () => {
    const statements = takeoverGrantPlan(input(['b', { key: 'a', mode: 'read' }])).statements;
    const takeover = statements.findIndex((s) => s.includes("SET g.status = 'EXPIRED'"));
    const recount = statements.findIndex((s) => s.includes('INTO @dbl_revived'));
    const insert = statements.findIndex((s) => s.startsWith('INSERT INTO db_lock_log'));
    assert.ok(takeover > 0 && takeover < recount && recount < insert);
    assert.match(statements[takeover]!, /p\.ended_count = p\.ended_count \+ 1/, "the victims' processes are told");
  });

  it('a budget bounds every statement on the server (MariaDB) or the locking read (MySQL)', () => {
    const maria = leanGrantPlan(input(['a'], { statementLimit: { kind: 'mariadb', ms: 350 } })).statements;
    assert.ok(maria.slice(1, -1).every((s) => s.startsWith('SET STATEMENT max_statement_time = 0.350 FOR ')));
    const mysql = leanGrantPlan(input(['a'], { statementLimit: { kind: 'mysql', ms: 350 } })).statements;
    assert.match(mysql[1]!, /^SELECT \/\*\+ MAX_EXECUTION_TIME\(350\) \*\/ /);
  });

  it("a single-key writer yields its turn to a waiter holding the key's doorbell", () => {
    const statements = leanGrantPlan(input(['a'], { doorbell: 'dbl:x' })).statements;
    assert.match(statements[2]!, /COALESCE\(IS_USED_LOCK\('dbl:x'\), CONNECTION_ID\(\)\) = CONNECTION_ID\(\)/);
  });
});
