/**
 * `npm run test:soak [-- --minutes=30]`: the chaos harness for a long time, in rounds of a few
 * minutes on fresh databases (so a violation points at one round), both strategies on shared
 * keys, every attack, plus a negative control first. Prints each round's figures and a summary,
 * ends with `N passed, N failed` (one per round), exits non-zero on any violation.
 */
import { TestDatabase } from '../support/test-database.js';
import { STRATEGIES } from '../support/strategies.js';
import { ALL_ATTACKS } from './attacks.js';
import { type ChaosPlan, type ChaosReport, describeReport, runChaos } from './harness.js';

const minutes = Number(
  /^--minutes=(\d+(\.\d+)?)$/.exec(process.argv.find((a) => a.startsWith('--minutes=')) ?? '')?.[1] ?? process.env.SOAK_MINUTES ?? 30,
);
const ROUND_MS = Math.min(5 * 60_000, minutes * 60_000);

const PLAN: ChaosPlan = {
  durationMs: ROUND_MS,
  workers: 8,
  callers: 2,
  strategies: STRATEGIES,
  keysPerStyle: 4,
  leaseMs: 1_500,
  timeoutMs: 3_000,
  gapMs: 20,
  attacks: ALL_ATTACKS,
  attackEveryMs: 600,
  locked: true,
};

async function round(plan: ChaosPlan): Promise<ChaosReport> {
  const db = await TestDatabase.create('dblock_soak');
  let report: ChaosReport | undefined;
  try {
    report = await runChaos(db, plan);
    return report;
  } finally {
    // A round with violations keeps its database for the post-mortem (its name is printed).
    if (report && report.violations.length > 0 && plan.locked) console.log(`  kept database ${db.name} for inspection`);
    else await db.drop();
  }
}

async function main(): Promise<number> {
  const started = performance.now();
  console.log(`soak: ${minutes} min in rounds of ${ROUND_MS / 60_000} min; strategies ${STRATEGIES.join(' + ')}; attacks ${ALL_ATTACKS.join(', ')}`);
  const control = await round({ ...PLAN, durationMs: 10_000, attacks: [], locked: false });
  const controlSeen = control.verdict.overlaps.length > 0 && control.verdict.lostUpdates > 0;
  console.log(`negative control (no locks, 10 s): ${describeReport(control)}`);
  let passed = controlSeen ? 1 : 0;
  let failed = controlSeen ? 0 : 1;
  const totals = { sections: 0, claims: 0, attacks: 0, overlaps: 0, lostUpdates: 0, leaked: 0, orphanRows: 0, untyped: 0, rounds: 0 };
  while (performance.now() - started < minutes * 60_000 - 30_000) {
    const left = minutes * 60_000 - (performance.now() - started);
    const report = await round({ ...PLAN, durationMs: Math.max(30_000, Math.min(ROUND_MS, left - 20_000)) });
    totals.rounds++;
    totals.sections += report.sections;
    totals.claims += report.verdict.claims;
    totals.attacks += Object.values(report.attacks).reduce((a, b) => a + b, 0);
    totals.overlaps += report.verdict.overlaps.length;
    totals.lostUpdates += report.verdict.lostUpdates;
    totals.leaked += report.leftovers.connections + report.leftovers.openTransactions;
    totals.orphanRows += report.leftovers.liveLogRows;
    totals.untyped += report.untyped.length;
    console.log(`round ${totals.rounds}: ${describeReport(report)}`);
    for (const v of report.violations) console.log(`  VIOLATION ${v}`);
    if (report.violations.length === 0) passed++;
    else failed++;
  }
  console.log(
    `soak summary: ${Math.round((performance.now() - started) / 60_000)} min, ${totals.rounds} rounds, ${totals.sections} sections ` +
      `(${totals.claims} claims), ${totals.attacks} attacks; overlaps ${totals.overlaps}, lost updates ${totals.lostUpdates}, ` +
      `leaked connections/transactions ${totals.leaked}, orphaned live log rows ${totals.orphanRows}, untyped errors ${totals.untyped}; ` +
      `negative control: ${control.verdict.overlaps.length} overlaps, ${control.verdict.lostUpdates} lost updates`,
  );
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
