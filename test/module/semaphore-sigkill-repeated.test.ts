import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import { contractSuite } from '../support/contract-targets.js';
import { dialectSql } from '../support/dialect-sql.js';
import { runSql, typeOfQueryable } from '../support/portable-sql.js';

/**
 * Semaphore holders SIGKILLed again and again while the others keep taking
 * permits (limit 2, 4 processes, lease 1 s). By the server clock, the time inside (recorded in a
 * business table right after the grant and right before the release; a killed holder's ends when
 * its process is dead) never has more than 2 holders at once; tokens are never reused; every dead
 * permit is taken over (EXPIRED) and counted as reclaimed by the process that took it over.
 */
const SELF = import.meta.url;
const LIMIT = 2;
const KEY = 'kill-crowd';
/** A timestamp as text that sorts as the time does (microseconds kept), in each server's words. */
const TIME_TEXT = {
  mysql: (t: string) => `DATE_FORMAT(${t}, '%Y-%m-%d %H:%i:%s.%f')`,
  postgres: (t: string) => `to_char(${t}, 'YYYY-MM-DD HH24:MI:SS.US')`,
};

export async function loop(ctx: WorkerContext<{ ms: number }>): Promise<{ entries: number; errors: string[] }> {
  const ds = ctx.app.get(DataSource);
  const type = typeOfQueryable(ds);
  const now = dialectSql(type).utcNow;
  const until = performance.now() + ctx.args.ms;
  const errors: string[] = [];
  let entries = 0;
  const one = async (): Promise<void> => {
    while (performance.now() < until) {
      try {
        await ctx.locks.withSemaphore(
          KEY,
          LIMIT,
          async (permit) => {
            const insert = `INSERT INTO sem_entries (pid, token, t_in) VALUES (?, ?, ${now})${type === 'postgres' ? ' RETURNING id' : ''}`;
            const res = await runSql<{ insertId: number } | { id: number }[]>(ds, insert, [process.pid, permit.fencingToken]);
            const id = Array.isArray(res) ? res[0]!.id : res.insertId;
            await sleep(20 + Math.random() * 80);
            // A holder that lost its permit meanwhile (a stall under CPU load) may overlap by design (unfenced work): marked, left out.
            await runSql(ds, `UPDATE sem_entries SET t_out = ${now}, lost = ? WHERE id = ?`, [permit.signal.aborted ? 1 : 0, id]);
          },
          { leaseMs: 1_000, timeoutMs: 10_000 },
        );
        entries++;
      } catch (error) {
        errors.push(`${(error as Error).name}: ${(error as Error).message}`);
      }
    }
  };
  await Promise.all([one(), one()]);
  return { entries, errors };
}

export async function reclaimed(ctx: WorkerContext): Promise<{ pid: number; reclaimed: number }> {
  return { pid: process.pid, reclaimed: ctx.locks.stats().reclaimed };
}

if (!process.env.DB_LOCK_WORKER) {
  contractSuite('semaphore', 'permit holders SIGKILLed repeatedly', { postgres: true }, (target) => {
    let db: TestDatabase;
    let workers: LockWorker[] = [];
    const config = () => ({
      settings: db.settings,
      options: target.options({ leaseMs: 1_000, janitor: false as const, retryMinDelayMs: 5, retryMaxDelayMs: 50 }),
    });
    before(async () => {
      db = await TestDatabase.forTarget(target);
      await db.query(
        `CREATE TABLE sem_entries (id ${db.sql.autoId}, pid INT NOT NULL, token BIGINT NOT NULL, t_in ${db.sql.timestamp} NOT NULL, ` +
          `t_out ${db.sql.timestamp} NULL, lost SMALLINT NOT NULL DEFAULT 0)${db.sql.tableOptions}`,
      );
      workers = await LockWorker.startMany(4, config());
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.close()));
      await db?.drop();
    });

    it(`never more than ${LIMIT} inside by the server clock; every dead permit taken over and counted`, async () => {
      const killedAt = new Map<number, string>();
      const runs: Promise<unknown>[] = workers.map((w) => w.run(SELF, 'loop', { ms: 9_000 }).catch(() => undefined));
      for (let k = 0; k < 4; k++) {
        await sleep(1_300);
        const i = k % workers.length;
        const victim = workers[i]!;
        await victim.kill();
        const [now] = await db.query<{ t: string }[]>(`SELECT ${TIME_TEXT[db.type](db.sql.utcNow)} AS t`);
        killedAt.set(victim.pid, now!.t);
        const fresh = await LockWorker.start(config());
        workers[i] = fresh;
        runs.push(fresh.run(SELF, 'loop', { ms: 9_000 - (k + 1) * 1_300 }).catch(() => undefined));
      }
      const results = (await Promise.all(runs)) as ({ entries: number; errors: string[] } | undefined)[];
      const errors = results.flatMap((r) => r?.errors ?? []).filter((e) => !e.startsWith('LockLostError'));
      const all = await db.query<{ pid: number; token: number; t_in: string; t_out: string | null; lost: number }[]>(
        `SELECT pid, token, ${TIME_TEXT[db.type]('t_in')} AS t_in, ${TIME_TEXT[db.type]('t_out')} AS t_out, lost FROM sem_entries`,
      );
      const rows = all.filter((r) => Number(r.lost) === 0);
      assert.ok(all.length - rows.length <= 3, `${all.length - rows.length} live holders lost their permit (stalls)`);
      const points: [string, number][] = [];
      for (const r of rows) {
        const end = r.t_out ?? killedAt.get(Number(r.pid));
        assert.ok(end, `an entry of pid ${r.pid} never ended, and that process was not killed`);
        points.push([r.t_in, 1], [end, -1]);
      }
      points.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
      let inside = 0;
      let peak = 0;
      let at = '';
      for (const [t, d] of points) {
        inside += d;
        if (inside > peak) [peak, at] = [inside, t];
      }
      const tokens = all.map((r) => Number(r.token));
      assert.equal(new Set(tokens).size, tokens.length, 'a token handed out twice');
      assert.ok(peak <= LIMIT, `${peak} holders inside at once at ${at} (limit ${LIMIT}); ${rows.length} entries`);
      assert.ok(rows.length > 40, `only ${rows.length} entries`);
      // Non-timeout errors only (a timeout while dead permits wait out their lease is possible but unlikely with 10 s budgets).
      assert.deepEqual(errors, [], 'calls failed');
      // Every permit of a killed process ended EXPIRED by a takeover (janitor off); none left live.
      await sleep(1_500);
      const survivorStats = await Promise.all(workers.map((w) => w.run<{ pid: number; reclaimed: number }>(SELF, 'reclaimed')));
      // one more grant by each survivor so that any still-expired permit is taken over
      const log = await db.query<{ status: string; holder: string; note: string | null; owner: string }[]>(
        `SELECT status, holder, note, owner FROM db_lock_log WHERE mode = 'permit'`,
      );
      const live = log.filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED');
      const killedPids = [...killedAt.keys()];
      const liveOfDead = live.filter((r) => killedPids.some((pid) => r.holder.endsWith(`:${pid}`)));
      assert.deepEqual(liveOfDead, [], 'permits of killed processes still live long after their lease');
      const ownerPid = new Map(log.map((r) => [r.owner, Number(r.holder.split(':').pop())]));
      const byTaker = new Map<number, number>();
      for (const r of log)
        if (r.status === 'EXPIRED' && r.note?.startsWith('taken over by ')) {
          const taker = ownerPid.get(r.note.slice('taken over by '.length));
          if (taker !== undefined) byTaker.set(taker, (byTaker.get(taker) ?? 0) + 1);
        }
      for (const s of survivorStats)
        assert.equal(
          s.reclaimed,
          byTaker.get(s.pid) ?? 0,
          `pid ${s.pid}: stats().reclaimed ${s.reclaimed}, rows it took over ${byTaker.get(s.pid) ?? 0}`,
        );
    });
  });
}
