/**
 * EXPERIMENT, not a library mode: the row-lock strategy without its durable grant record. The
 * library's row-lock takes the row lock in a transaction on the DataSource, then commits the
 * fencing token and the audit row in a short transaction of its own on the library's pool, before
 * the work starts: one more durable commit per acquisition, so that a holder whose connection dies
 * leaves a row behind and its token is never handed out twice. This design does the same work
 * with that record inside the locking transaction instead (same locking read, same grant
 * statements, same fence, one COMMIT), so the difference between the two is what the separate
 * durable commit costs. What it gives up: a holder killed mid-hold leaves no trace and the next
 * holder receives the same fencing token; and the key's row in db_lock stays locked for the whole
 * hold, so lease grants of the key would block on it.
 */
import { randomUUID } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { resolveTargets } from '../../../lib/core/lock-key.js';
import { leanGrantPlan } from '../../../lib/lock-log/grant.sql.js';
import { endInCommitStatement } from '../../../lib/lock-log/hold.sql.js';
import { lockRowsStatements } from '../../../lib/strategies/row-lock/row-lock.sql.js';
import { partsOf } from '../../support/lock-internals.js';
import { hostNow } from '../stats.js';
import { managerQuery } from './decorated.js';
import { grantStatements } from './library.js';
import type { DesignDeps, LockDesign } from './types.js';

/** The lean grant's statements without its own START TRANSACTION and COMMIT: they run inside the locking transaction. */
function grantWithin(key: string, processId: string, waitedMs: number): { sql: string; parse: (results: unknown[]) => { granted: boolean; rowIds: string[] } } {
  const plan = leanGrantPlan({
    acquisitionId: randomUUID(),
    holder: `bench-experiment:${process.pid}`,
    processId,
    strategy: 'row-lock',
    targets: resolveTargets(key, 'write', ''),
    leaseMs: 30_000,
    waitedMs,
    writerWaitMarkMs: 0,
    writerPreference: true,
    rowLocksAuthoritative: true,
  });
  const inner = plan.statements.filter((s) => s !== 'START TRANSACTION' && s !== 'COMMIT');
  if (inner.length !== plan.statements.length - 2) throw new Error('the grant plan no longer starts with START TRANSACTION and ends with COMMIT');
  return {
    sql: inner.join(';\n'),
    parse: (results) => {
      const outcome = plan.parse([undefined, ...results, undefined]);
      return { granted: outcome.granted, rowIds: outcome.granted ? outcome.rows.map((r) => r.id) : [] };
    },
  };
}

export function rowLockNoRecordDesign(deps: DesignDeps): LockDesign {
  const parts = partsOf(deps.locks);
  const typeorm0 = deps.dataSourceQueries();
  const rollback = async (runner: QueryRunner): Promise<void> => {
    if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
  };
  return {
    id: 'row-lock-no-record',
    // the transaction (SET TRANSACTION ISOLATION LEVEL, START, COMMIT) + the locking read + the grant without its own START/COMMIT + the fence + critical section
    usefulStatements: 3 + 1 + (grantStatements('row-lock') - 2) + 1 + 2,
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare(key) {
      // The rows the library creates on a key's first use (key row with its fencing counter, row-lock row).
      await parts.log.createKeyRows(resolveTargets(key, 'write', '').map((t) => t.bytes));
    },
    async hold(key, _slot, body) {
      const started = hostNow();
      const runner = deps.dataSource.createQueryRunner('master');
      try {
        await runner.startTransaction('READ COMMITTED');
        for (const statement of lockRowsStatements(resolveTargets(key, 'write', ''), parts.log.flavor)) await runner.query(statement.sql(Infinity));
        const grant = grantWithin(key, parts.log.processId, hostNow() - started);
        const outcome = grant.parse((await runner.query(grant.sql)) as unknown[]);
        // Only this design uses the key and its row lock is held: a refusal would be a bench bug.
        if (!outcome.granted) throw new Error(`experiment: grant of '${key}' refused under its own row lock`);
        const acquiredAt = hostNow();
        await body(managerQuery(runner.manager));
        const releasingAt = hostNow();
        const fence = endInCommitStatement(outcome.rowIds);
        await runner.query(fence.sql, fence.parameters);
        await runner.commitTransaction();
        return { acquiredAt, releasingAt };
      } catch (error) {
        await rollback(runner);
        throw error;
      } finally {
        await runner.release();
      }
    },
    roundTrips: () => deps.dataSourceQueries() - typeorm0,
    redisCommands: () => 0,
    async close() {},
  };
}
