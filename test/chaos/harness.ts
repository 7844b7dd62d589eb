import { setTimeout as sleep } from 'node:timers/promises';
import type { LockStrategyName } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import type { TestDatabase } from '../support/test-database.js';
import { LockWorker, type WorkerOptions } from '../support/worker-host.js';
import { type Attack, ATTACKS, type AttackTarget } from './attacks.js';
import { checkLeftovers, checkSections, type Leftovers, overlapEvidence, type Verdict, violations } from './invariants.js';
import { CHAOS_TABLES, type ChaosLoopArgs, type ChaosLoopResult, type SectionStyle } from './scenario.js';

const SCENARIO = new URL('./scenario.js', import.meta.url).href;
const CLOCK_SKEW = new URL('../support/clock-skew.js', import.meta.url).href;

export interface ChaosPlan {
  durationMs: number;
  /** Worker processes; each runs one style and one strategy (they alternate), `callers` loops each. */
  workers: number;
  callers: number;
  strategies: readonly LockStrategyName[];
  /** Keys per style; every worker of a style shares them, whatever its strategy. */
  keysPerStyle: number;
  leaseMs: number;
  timeoutMs: number;
  gapMs: number;
  /** Attacks to draw from, one every `attackEveryMs`; none for a quiet run. */
  attacks: readonly Attack[];
  attackEveryMs: number;
  /** false: the negative control, sections without any lock. */
  locked: boolean;
}

/** The workers' results summed, the attacks made, and the verdict from the database. */
export interface ChaosReport extends ChaosLoopResult {
  plan: ChaosPlan;
  attacks: Record<string, number>;
  verdict: Verdict;
  leftovers: Leftovers;
  violations: string[];
  /** On an overlap: the rows and attacks around the first one, for the report (empty otherwise). */
  evidence: string[];
}

/** How a worker's process differs from the others: client clocks and time zones vary (the library must use only the server's clock). */
function processOptions(index: number): WorkerOptions {
  const variants: WorkerOptions[] = [
    {},
    { execArgv: ['--import', CLOCK_SKEW], env: { CLOCK_SKEW_MS: String(-10 * 60_000), TZ: 'America/New_York' } },
    { execArgv: ['--import', CLOCK_SKEW], env: { CLOCK_SKEW_MS: String(3_600_000), TZ: 'Asia/Kolkata' } },
  ];
  return variants[index % variants.length]!;
}

export async function runChaos(db: TestDatabase, plan: ChaosPlan): Promise<ChaosReport> {
  for (const sql of CHAOS_TABLES) await db.query(sql);
  const styles: SectionStyle[] = ['fenced', 'signal'];
  const keys = (style: SectionStyle) => Array.from({ length: plan.keysPerStyle }, (_, i) => `${style}-${i}`);
  for (const key of keys('fenced')) await db.query('INSERT INTO chaos_counter (k) VALUES (?)', [key]);

  const started = performance.now();
  const results: ChaosLoopResult[] = [];
  const runs: Promise<void>[] = [];
  const live = new Map<number, AttackTarget>();
  const options = { leaseMs: plan.leaseMs, retryMaxDelayMs: 50, escapedWrites: 'ignore' as const, janitor: { intervalMs: 2_000 } };

  /** Starts worker `index` for what is left of the run (again after it was killed). */
  const launch = async (index: number): Promise<void> => {
    const left = plan.durationMs - (performance.now() - started);
    if (left < 1_000) return;
    const worker = await LockWorker.start({ settings: db.settings, options }, processOptions(index));
    const style = styles[index % styles.length]!;
    const args: ChaosLoopArgs = {
      keys: keys(style),
      style,
      strategy: plan.strategies[Math.floor(index / styles.length) % plan.strategies.length]!,
      durationMs: left,
      callers: plan.callers,
      timeoutMs: plan.timeoutMs,
      leaseMs: plan.leaseMs,
      gapMs: plan.gapMs,
      locked: plan.locked,
    };
    const target: AttackTarget = { index, worker, observer: index < 2, paused: false };
    live.set(index, target);
    runs.push(
      worker.run<ChaosLoopResult>(SCENARIO, 'chaosLoop', args).then(
        (result) => {
          // Timeouts are judged only in processes never paused (a paused process's own clock runs on).
          results.push(target.observer ? result : { ...result, lateTimeouts: 0 });
        },
        () => undefined, // killed by an attack: its sections left their evidence in the database
      ),
    );
  };

  await Promise.all(Array.from({ length: plan.workers }, (_, i) => launch(i)));
  const attacks: Record<string, number> = {};
  // A killed worker is relaunched in the background: the attack rate must not depend on how long a
  // worker takes to boot (on a loaded machine that starved the run of attacks).
  const relaunches: Promise<void>[] = [];
  const relaunch = (index: number): Promise<void> => {
    relaunches.push(launch(index));
    return Promise.resolve();
  };
  const context = { db, plan, relaunch, live };
  const attackLog: string[] = [];
  while (plan.attacks.length > 0 && performance.now() - started < plan.durationMs - plan.attackEveryMs) {
    await sleep(plan.attackEveryMs * (0.5 + Math.random()));
    const attack = plan.attacks[Math.floor(Math.random() * plan.attacks.length)]!;
    const at = new Date().toISOString();
    if (await ATTACKS[attack](context)) {
      attacks[attack] = (attacks[attack] ?? 0) + 1;
      attackLog.push(`${at} ${attack}`);
    }
  }
  // Let every loop end on its own time, then every process close as an app would.
  await Promise.all(relaunches);
  while (runs.length > 0) await runs.shift();
  for (const target of live.values()) target.worker.signal('SIGCONT');
  await Promise.all([...live.values()].map((t) => t.worker.close()));

  // Holders killed mid-run left live rows: after their leases, the janitor ends them.
  await sleep(plan.leaseMs + 500);
  const janitor = await createLockApp(db.settings, { leaseMs: plan.leaseMs });
  await janitor.locks.runJanitor();
  await janitor.app.close();

  const verdict = await checkSections(db);
  const leftovers = await checkLeftovers(db);
  const sum = (pick: (r: ChaosLoopResult) => number) => results.reduce((n, r) => n + pick(r), 0);
  const typed: Record<string, number> = {};
  for (const r of results) for (const [name, n] of Object.entries(r.typed)) typed[name] = (typed[name] ?? 0) + n;
  return {
    plan,
    sections: sum((r) => r.sections),
    timeouts: sum((r) => r.timeouts),
    lateTimeouts: sum((r) => r.lateTimeouts),
    typed,
    business: sum((r) => r.business),
    untyped: results.flatMap((r) => r.untyped),
    attacks,
    verdict,
    leftovers,
    evidence: verdict.overlaps.length > 0 ? await overlapEvidence(db, verdict.overlaps[0]!, attackLog) : [],
    violations: [
      ...violations(verdict, leftovers, 2 * plan.keysPerStyle),
      ...(sum((r) => r.lateTimeouts) > 0 ? [`${sum((r) => r.lateTimeouts)} timeouts later than their bound`] : []),
      ...results.flatMap((r) => r.untyped).map((u) => `untyped error: ${u}`),
    ],
  };
}

export function describeReport(r: ChaosReport): string {
  return (
    `${r.sections} sections (${r.verdict.claims} claims, ${r.verdict.uncommittedClaims} of them rolled back, ${r.verdict.abortedSections} ended knowing the lock was lost), ` +
    `attacks ${JSON.stringify(r.attacks)}, timeouts ${r.timeouts} (late ${r.lateTimeouts}), typed errors ${JSON.stringify(r.typed)}, ` +
    `business-statement errors ${r.business}, untyped ${r.untyped.length}; overlaps ${r.verdict.overlaps.length}, lost updates ${r.verdict.lostUpdates}, ` +
    `token order ${r.verdict.tokenOrder.length}; leftovers ${JSON.stringify(r.leftovers)}`
  );
}
