import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { DataSource } from 'typeorm';
import { LockService, WriteLock } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';

@Injectable()
export class ReconciliationJob {
  constructor(
    readonly locks: LockService,
    private readonly dataSource: DataSource,
  ) {}

  /**
   * The 3 a.m. reconciliation: every node has the cron, one runs it. (Fired by the test, not the
   * clock.) It keeps running until the other nodes' attempts have been skipped, so all three calls
   * overlap without relying on timing: if two ran, each would wait for two skips that never come.
   */
  @Cron('0 0 3 * * *')
  @WriteLock(undefined, { onLocked: 'skip' })
  async reconcile(round = 0, nodes = 3): Promise<'ran' | undefined> {
    const manager = this.locks.manager;
    await runSql(manager, 'INSERT INTO job_runs (round, pid) VALUES (?, ?)', [round, process.pid]);
    const deadline = performance.now() + 10_000;
    while (performance.now() < deadline) {
      const [row] = (await runSql(this.dataSource, 'SELECT COUNT(*) AS n FROM job_attempts WHERE round = ? AND outcome = ?', [round, 'skipped'])) as {
        n: string;
      }[];
      if (Number(row!.n) >= nodes - 1) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return 'ran';
  }
}

export const imports = [ScheduleModule.forRoot()];
export const providers = [ReconciliationJob];

export async function fireJob(ctx: WorkerContext<{ round: number }>): Promise<{ outcome: 'ran' | 'skipped'; skipped: number }> {
  const job = ctx.app.get(ReconciliationJob);
  const result = await job.reconcile(ctx.args.round);
  const outcome = result === 'ran' ? 'ran' : 'skipped';
  await runSql(ctx.app.get(DataSource), 'INSERT INTO job_attempts (round, pid, outcome) VALUES (?, ?, ?)', [ctx.args.round, process.pid, outcome]);
  return {
    outcome,
    skipped: ctx.locks.stats().skipped,
  };
}
