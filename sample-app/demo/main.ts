import { DatabaseUnreachableError, connectDatabase, connectServer, ensureDatabase } from '../database/ensure-database.js';
import { readSampleConfig, SampleConfigError, serverOptions } from '../config/sample-config.js';
import {
  type Check,
  expectedAnswers,
  logCountsByStatus,
  moneyConserved,
  noOverlap,
  nothingLeftHeld,
  ownershipChains,
  uniqueOrderNumbers,
} from './checks.js';
import { type Instance, startInstance, stopInstances, stopOnInterrupt, waitUntilReady } from './instances.js';
import { buildRequests, type LoadPlan, type Outcome, runLoad } from './load.js';

/**
 * `npm run demo`: three instances of the sample app on one database (MySQL/MariaDB or
 * PostgreSQL, as DB_LOCK_SAMPLE_URL says), a few hundred concurrent repayments, claim sales and
 * order numbers spread over them, then checks computed from the database itself. Exits 0 only
 * if every check passed.
 */
const PORTS = [3101, 3102, 3103];
const DEMO_DATABASE = 'dblock_demo';
const PLAN: LoadPlan = { repayments: 120, transfers: 150, orders: 40, statements: 30, concurrency: 24 };

async function main(): Promise<number> {
  const config = readSampleConfig();
  // Only the server of DB_LOCK_SAMPLE_URL is used: the demo has a database of its own.
  await (await connectServer(config.databaseUrl)).end();
  const url = new URL(config.databaseUrl.href);
  url.pathname = `/${DEMO_DATABASE}`;
  const { host, port } = serverOptions(url);
  const where = `${host}:${port}`;

  // A fresh database every run: the checks compare against the seed data.
  await ensureDatabase(url, { recreate: true });
  console.log(`Database ${DEMO_DATABASE} on ${where} (the server of DB_LOCK_SAMPLE_URL): dropped and created afresh`);

  const instances: Instance[] = [];
  const interrupt = stopOnInterrupt(instances);
  try {
    // The first instance runs the migrations and seeds; the other two start once it is up
    // (TypeORM migrations must not run from several processes at once on an empty database).
    instances.push(startInstance('instance 1', PORTS[0]!, url.href));
    await waitUntilReady(instances[0]!);
    instances.push(...PORTS.slice(1).map((port, i) => startInstance(`instance ${i + 2}`, port, url.href)));
    await Promise.all(instances.slice(1).map((instance) => waitUntilReady(instance)));
    console.log(`3 instances up: ${instances.map((i) => i.baseUrl).join(', ')}`);

    const requests = buildRequests(PLAN);
    console.log(`Sending ${requests.length} requests, ${PLAN.concurrency} at a time, round-robin over the instances...`);
    const started = performance.now();
    const outcomes = await runLoad(
      instances.map((i) => i.baseUrl),
      requests,
      PLAN.concurrency,
    );
    if (interrupt.interrupted) return 130; // the handler is stopping the instances: no report
    const seconds = (performance.now() - started) / 1000;
    console.log(`Done in ${seconds.toFixed(1)} s (${Math.round(outcomes.length / seconds)} requests/s). Stopping the instances (SIGTERM)...`);
    await stopInstances(instances);

    const db = await connectDatabase(url);
    try {
      const checks = [
        await moneyConserved(db, outcomes),
        await ownershipChains(db, outcomes),
        await noOverlap(db),
        await uniqueOrderNumbers(db, outcomes),
        expectedAnswers(outcomes),
        await nothingLeftHeld(db),
      ];
      printReport(outcomes, checks, await logCountsByStatus(db));
      return checks.every((c) => c.ok) ? 0 : 1;
    } finally {
      await db.end();
    }
  } finally {
    await stopInstances(instances);
  }
}

function printReport(outcomes: readonly Outcome[], checks: readonly Check[], logCounts: string): void {
  const count = (filter: (o: Outcome) => boolean) => outcomes.filter(filter).length;
  console.log('\n== Requests');
  for (const kind of ['repay', 'transfer', 'order', 'statement'] as const) {
    const mine = outcomes.filter((o) => o.kind === kind);
    const byStatus = new Map<string, number>();
    for (const o of mine)
      byStatus.set(`${o.status}${o.error ? ` ${o.error}` : ''}`, (byStatus.get(`${o.status}${o.error ? ` ${o.error}` : ''}`) ?? 0) + 1);
    const perInstance = [0, 1, 2].map((i) => count((o) => o.kind === kind && o.instance === i)).join('/');
    console.log(
      `  ${kind.padEnd(9)} ${String(mine.length).padStart(4)} (per instance ${perInstance}): ${[...byStatus].map(([s, c]) => `${c} x ${s}`).join(', ')}`,
    );
  }
  const timeouts = count((o) => o.status === 423);
  const lost = count((o) => o.status === 409 && o.error === 'LockLostError');
  const conflicts = count((o) => o.status === 409 && o.error !== 'LockLostError');
  console.log(`  lock busy past the timeout (423): ${timeouts}; lock lost (409 LockLostError): ${lost}; business conflicts (409): ${conflicts}`);
  console.log(`\n== Lock log (db_lock_log) by status\n  ${logCounts}`);
  console.log('\n== Checks');
  for (const check of checks) console.log(`  ${check.ok ? 'PASS' : 'FAIL'}  ${check.name}: ${check.detail}`);
  const failed = checks.filter((c) => !c.ok).length;
  console.log(failed === 0 ? `\nAll ${checks.length} checks passed.` : `\n${failed} of ${checks.length} checks FAILED.`);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof DatabaseUnreachableError) console.error(`\n${error.help('demo')}\n`);
    else if (error instanceof SampleConfigError) console.error(`\nInvalid setting: ${error.message}\n`);
    else console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
