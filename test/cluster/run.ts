/**
 * `npm run test:cluster`: the library's guarantees on a 3-node MariaDB Galera cluster.
 *
 * Starts the cluster (scripts/cluster/galera.mjs), runs worker processes whose DataSources point
 * at different nodes, doing read–sleep–write sections on counters under withLock, decorated
 * fenced methods and the row-lock strategy, and checks from the database (server timestamps,
 * values read, fencing tokens, log rows) and from the holders' own view that no two holders were
 * ever in at once. Phases: all workers on one node, spread over three, a kill -9 of one node
 * mid-run (with leases both longer and shorter than the freeze it causes), and an unlocked
 * negative control that must show violations. Every node it started is stopped, whatever happens.
 *
 * Options: --control=batch runs with the cluster path switched off in the workers (negative
 * control: grants as one batch, answers trusted); DBLOCK_CLUSTER_LIB=<build>/lib/index.js points
 * the suite at another build. Exit code 0 only when every check passed.
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type mysql from 'mysql2/promise';
import { liveRows } from './checks.js';
import { connectNode, galera } from './galera.js';
import { guardedLoops, longHoldLoops, nodeKillDrive, type PhaseResult, runPhase, shortLeaseLoops } from './phases.js';
import { figures, formatTally, killFigures, printPhase } from './report.js';
import { LONG_LEASE_MS, SHORT_LEASE_MS, setupDatabase, startWorkers } from './setup.js';
import { hasRowLock, loadTarget, prepareTarget } from './target.js';
import type { ClusterWorker } from './worker-handle.js';

const VICTIM = 3;
const REPORT_FILE = 'build/cluster-report.json';
const RUN_LIMIT_MS = 12 * 60_000;
/** Throughput slices per configuration, and their length. */
const SLICES = 3;
const SLICE_MS = 5_000;
const log = (line: string): void => void process.stdout.write(`[cluster] ${line}\n`);

async function main(): Promise<number> {
  const unsafeBatch = process.argv.includes('--control=batch');
  const entry = prepareTarget();
  const { lib } = await loadTarget();
  const rowLock = hasRowLock(lib);
  log(`library under test: ${entry}${unsafeBatch ? ' (cluster path switched off: negative control)' : ''}; row-lock ${rowLock ? 'on' : 'not in this build'}`);
  const bed = await galera();
  const workers: ClusterWorker[] = [];
  const stopAll = async (): Promise<void> => {
    for (const w of workers) w.kill();
    await bed.stopCluster({ graceMs: 10_000 });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => void stopAll().finally(() => process.exit(130)));
  // A worker stuck for good must not hold CI: the whole run gets a bound, and the nodes still stop.
  setTimeout(() => {
    log(`test:cluster FAILED: the run took longer than ${RUN_LIMIT_MS / 60_000} minutes`);
    void stopAll().finally(() => process.exit(1));
  }, RUN_LIMIT_MS).unref();

  const problems: string[] = [];
  try {
    await bed.startCluster();
    const conn = await connectNode(bed, 1);
    const database = await setupDatabase(conn, lib);
    const phases: PhaseResult[] = [];

    // 1-2. The same workload with every worker on node 1, and with two workers per node, in
    // alternating slices: the background load of a shared box then falls on both alike.
    const onOne = await startWorkers(bed, database, [1, 1, 1, 1, 1, 1], unsafeBatch, workers);
    const spread = await startWorkers(bed, database, [1, 2, 3, 1, 2, 3], unsafeBatch, workers);
    for (let round = 1; round <= SLICES; round++) {
      for (const [name, set] of [['one-node', onOne], ['three-nodes', spread]] as const)
        phases.push(await runPhase(`${name}#${round}`, set, guardedLoops(`${name}#${round}`, rowLock), conn, () => sleep(SLICE_MS)));
    }
    await Promise.all(onOne.map((w) => w.close()));
    workers.splice(0, workers.length, ...spread);

    // 3-4. Two workers per node: a node killed mid-run, then the unlocked control.
    const killLoops = [...guardedLoops('kill', rowLock), ...longHoldLoops('kill', LONG_LEASE_MS), ...shortLeaseLoops('kill', rowLock)];
    phases.push(await runPhase('kill', spread, killLoops, conn, nodeKillDrive(bed, VICTIM, log)));
    const control = await runPhase(
      'unlocked',
      spread,
      [{ kind: 'unlocked', key: 'unlocked:counter', callers: 1, lease: 'long', gapMs: 3 }],
      conn,
      () => sleep(4_000),
      { tokens: false },
    );

    const live = await endOfRun(spread, conn);
    workers.length = 0;
    await conn.end();
    report(phases, control, live, problems);
    writeFileSync(REPORT_FILE, JSON.stringify({ entry, unsafeBatch, phases: [...phases, control], live }, null, 1));
    log(`full report: ${REPORT_FILE}`);
  } catch (error) {
    problems.push(`the run itself failed: ${(error as Error)?.stack ?? String(error)}`);
  } finally {
    await stopAll().catch((error: unknown) => problems.push(`stopping the cluster failed: ${String(error)}`));
  }
  if (problems.length === 0) {
    log('test:cluster PASSED: 0 violations, every error typed, every log row terminal, negative control caught');
    return 0;
  }
  log(`test:cluster FAILED (${problems.length} problem(s)):`);
  for (const p of problems) log(`  - ${p}`);
  return 1;
}

/**
 * Workers close (their apps release what they hold) but one, which runs the janitor once the
 * leases of holders lost in the drill (rows that could not be given back while their node was
 * down) have run out. Returns the log rows still live after that.
 */
async function endOfRun(workers: ClusterWorker[], conn: mysql.Connection): Promise<number> {
  const [keeper, ...rest] = workers.filter((w) => w.settings.node === 1);
  await Promise.all([...rest, ...workers.filter((w) => w.settings.node !== 1)].map((w) => w.close()));
  let live = (await liveRows(conn)).length;
  const until = performance.now() + 25_000;
  while (live > 0 && performance.now() < until) {
    await sleep(2_000);
    await keeper!.janitor();
    live = (await liveRows(conn)).length;
  }
  await keeper!.close();
  live = (await liveRows(conn)).length;
  log(`log rows still live at the end: ${live}`);
  return live;
}

function report(phases: PhaseResult[], control: PhaseResult, live: number, problems: string[]): void {
  for (const phase of phases) {
    const f = figures(phase);
    printPhase(f, phase, log, phase.name.includes('#'));
    if (f.violations > 0) problems.push(`phase ${f.name}: ${f.violations} violation(s)`);
    if (f.untyped > 0) problems.push(`phase ${f.name}: ${f.untyped} untyped error(s) reached callers`);
    if (f.sections === 0) problems.push(`phase ${f.name}: no section completed`);
  }
  const rate = (prefix: string) => {
    const slices = phases.filter((p) => p.name.startsWith(`${prefix}#`)).map(figures);
    const total = slices.reduce((n, f) => n + f.sections, 0) / slices.reduce((n, f) => n + f.seconds, 0);
    return `${total.toFixed(1)} sections/s (slices ${slices.map((f) => f.perSecond.toFixed(1)).join(', ')})`;
  };
  log(`throughput, same workload, alternating slices: one node ${rate('one-node')}; three nodes ${rate('three-nodes')}`);
  const kill = phases.find((p) => p.name === 'kill');
  if (kill) {
    const k = killFigures(kill, VICTIM);
    log(
      `node kill: freezes seen by the survivors' workers (longest heartbeat commit): at the death ${Math.round(k.deathFreezeMs)} ms, ` +
        `during the rejoin ${Math.round(k.rejoinFreezeMs)} ms; ` +
        `longest stretch without a completed section ${Math.round(k.survivorGapMs)} ms; longest call ${Math.round(k.survivorLongestCallMs)} ms`,
    );
    log(`node kill: errors on node ${VICTIM}'s workers: ${formatTally(k.tallyVictim)}`);
    log(`node kill: errors on the survivors' workers: ${formatTally(k.tallySurvivors)}`);
    log(
      `node kill: holders that lost their lock: ${k.lostOnShortLeases} on short leases (${SHORT_LEASE_MS} ms), ` +
        `${k.survivorsLostOnLongLeases} of the survivors' on long leases (${LONG_LEASE_MS} ms; survivors' long holds spanning the kill: ${k.longHoldsAtKill}); node ${VICTIM}'s workers after the rejoin: ${k.victimSectionsAfterRejoin} sections`,
    );
    if (k.victimSectionsAfterRejoin === 0) problems.push(`node ${VICTIM}'s workers did not come back after the rejoin`);
    if (Object.keys(k.tallyVictim).length === 0) problems.push(`node ${VICTIM}'s workers saw no error: the kill did not happen mid-run`);
    if (k.lostOnShortLeases === 0) problems.push('no short-lease holder lost its lock in the freeze: that case was not exercised');
  }
  const c = figures(control);
  printPhase(c, control, log);
  if (c.violations === 0) problems.push('the unlocked negative control showed no violation: the checks cannot see one');
  if (live > 0) problems.push(`${live} log row(s) still live at the end`);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(`test:cluster crashed: ${String((error as Error)?.stack ?? error)}`);
    process.exit(1);
  },
);
