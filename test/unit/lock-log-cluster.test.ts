import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { confirmOnSession } from '../../lib/store/mysql/grant-confirmation.js';
import { MysqlLockLog as LockLog } from '../../lib/store/mysql/mysql-lock-log.js';
import type { LockConnectionPool, LockSession } from '../../lib/store/mysql/lock-connection-pool.js';
import { LockStatementError } from '../../lib/store/lock-statement.error.js';
import { SINGLE_MARIADB } from '../../lib/store/mysql/server-flavor.js';

const ECONNREFUSED = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

/**
 * A lock pool that records what it was sent and answers from `answer` (or fails while `down`),
 * so the lock log's ordering decisions can be checked without a server.
 */
function fakePool(answer: (sql: string) => unknown = () => ({ affectedRows: 1 })) {
  const sent: string[] = [];
  const state = { down: false, delayMs: 0 };
  const reply = async (sql: string): Promise<unknown> => {
    sent.push(sql);
    if (state.delayMs > 0) await new Promise((r) => setTimeout(r, state.delayMs));
    if (state.down) throw new LockStatementError('unreachable', ECONNREFUSED);
    if (sql.startsWith('SELECT lock_key, fencing_token')) return [[], [], [], []];
    if (sql.startsWith('INSERT INTO db_lock_process')) return { insertId: 7 };
    return answer(sql);
  };
  const pool = {
    isClosed: false,
    query: (sql: string) => reply(sql),
    queryThen: (sql: string, _options: unknown, parse: (r: unknown) => unknown, rescue?: (e: LockStatementError) => unknown) =>
      reply(sql).then(parse, rescue ? (e: unknown) => rescue(LockStatementError.from(e)) : undefined),
    session: async (_options: unknown, fn: (session: LockSession) => Promise<unknown>) =>
      fn({ threadId: 1, query: (sql: string) => reply(sql) as Promise<never> }),
  };
  return { pool: pool as unknown as LockConnectionPool, sent, state };
}

describe('lock log: ends owed after an outage', () => {
  it('a release that could not reach the database is sent before the next renewal, and no renewal goes out before it', async () => {
    const { pool, sent, state } = fakePool((sql) => (sql.startsWith('SELECT ended_count') ? [{ ended_count: '0' }] : { affectedRows: 1 }));
    const log = new LockLog(pool, SINGLE_MARIADB, 'h:1');
    await log.start();
    state.down = true;
    await assert.rejects(log.endRows(['41', '42'], 'EXPIRED', 'given up'), LockStatementError);
    // Still down: the owed end fails again and the renewal is not sent.
    sent.length = 0;
    await assert.rejects(log.renew(performance.now() + 1000), LockStatementError);
    assert.equal(sent.length, 1);
    assert.match(sent[0]!, /^UPDATE db_lock_log FORCE INDEX \(PRIMARY\) SET status = 'EXPIRED'.* WHERE id IN \(41, 42\)/);
    // Back: first the owed end, then the renewal; settled once, not again.
    state.down = false;
    sent.length = 0;
    await log.renew(performance.now() + 1000);
    assert.match(sent[0]!, /^UPDATE db_lock_log FORCE INDEX \(PRIMARY\) SET status = 'EXPIRED'/);
    assert.match(sent[1]!, /^INSERT INTO db_lock_process .* ON DUPLICATE KEY UPDATE renewed_at/);
    sent.length = 0;
    await log.renew(performance.now() + 1000);
    assert.ok(!sent.some((sql) => sql.startsWith('UPDATE db_lock_log')), 'an owed end is settled once');
  });
});

describe('lock log: a grant that answers after its lease', () => {
  it('is given back and reported not granted', async () => {
    // The single-key grant's answers: START, the UPDATE that matched, the INSERT, the row read back, COMMIT.
    const granted = [
      { id: 9, fencing_token: 4, expires_at: '2026-01-01 00:00:00.000000', key_rows: null, writer_waiting: null, busy: null, expired: null },
    ];
    const { pool, sent, state } = fakePool((sql) =>
      sql.startsWith('START TRANSACTION')
        ? [{ affectedRows: 0 }, { affectedRows: 1, insertId: 4 }, { affectedRows: 1, insertId: 9 }, granted, {}]
        : { affectedRows: 1 },
    );
    const log = new LockLog(pool, SINGLE_MARIADB, 'h:1');
    await log.start();
    const input = {
      acquisitionId: 'a-1',
      strategy: 'lease' as const,
      targets: resolveTargets('k', 'write', ''),
      leaseMs: 100,
      waitedMs: 0,
      writerWaitMarkMs: 0,
      writerPreference: true,
    };
    assert.equal((await log.grant(input, Infinity)).granted, true, 'in time: granted');
    state.delayMs = 120; // longer than the 100 ms lease
    sent.length = 0;
    const late = await log.grant({ ...input, acquisitionId: 'a-2' }, Infinity);
    assert.deepEqual(late, { granted: false, reason: 'busy' });
    assert.match(sent[1]!, /^UPDATE db_lock_log FORCE INDEX \(PRIMARY\) SET status = 'RELEASED'.* WHERE id = 9 /);
  });
});

describe('cluster grant read-back', () => {
  const rows = [{ id: '9', storedKey: 'k', fencingToken: 4, expiresAt: new Date(0) }];
  const outcome = { granted: true as const, rows, reclaimed: 0, serverWaitMs: 0, serverStartedAt: new Date(0) };
  const session = (answers: unknown[]) => {
    const sent: string[] = [];
    return { sent, session: { threadId: 1, query: async (sql: string) => (sent.push(sql), answers.shift() as never) } };
  };

  it('counts a grant whose rows are all there, live, with their tokens', async () => {
    const { session: s } = session([[{ id: 9, lock_key: Buffer.from('k'), fencing_token: 4, status: 'ACQUIRED' }]]);
    assert.equal(await confirmOnSession(s, 'a-1', '7', outcome), outcome);
  });

  it('gives back on the same connection what a partial grant left, and reports not granted', async () => {
    const { session: s, sent } = session([[{ id: 9, lock_key: Buffer.from('k'), fencing_token: 3, status: 'ACQUIRED' }], { affectedRows: 1 }]);
    assert.deepEqual(await confirmOnSession(s, 'a-1', '7', outcome), { granted: false, reason: 'busy' });
    assert.match(sent[1]!, /^UPDATE db_lock_log SET status = 'RELEASED'.*process_id = '7' AND owner = 'a-1'/);
  });

  it('a failed read-back is an unknown outcome (given back by the caller), never a retry', async () => {
    const s: LockSession = { threadId: 1, query: async () => Promise.reject(Object.assign(new Error('deadlock'), { errno: 1213 })) };
    await assert.rejects(confirmOnSession(s, 'a-1', '7', outcome), (error: unknown) => error instanceof LockStatementError && error.outcomeUnknown);
  });
});
