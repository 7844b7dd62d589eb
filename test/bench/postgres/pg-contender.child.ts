/**
 * One process of the PostgreSQL hot-key contention (pg-contention.ts): `callers` callers loop on
 * one key for the window, each hold incrementing the counter row, and print their holds and wait
 * latencies. Designs: `for-update` (a bare `SELECT … FOR UPDATE` transaction on a plain pg pool),
 * `advisory` (`pg_advisory_xact_lock` in a transaction), `lease` and `row-lock` (the library,
 * `runLocked` with the increment through `locks.manager`), and `row-lock-by-hand`: a row-lock
 * hold's statements sent by hand on a plain pg pool in the library's round trips (BEGIN, the
 * writers' queue lock and the key row's token bump; the increment; the audit row and COMMIT), the
 * floor of the library's row-lock; `lease-by-hand`: a contended lease hold's statements by hand in
 * the library's round trips (on the caller's own session, the doorbell wait with the one-statement
 * grant behind it; on a pooled connection, BEGIN and the increment, then the log row's end with
 * COMMIT; on its session again, the ring), the floor of the library's lease.
 * argv: design url callers warmupMs windowMs warmupHolds (the library's designs: sequential holds
 * on a key of the process's own before READY, see warmUp).
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { DbLockModule, LockService } from '../../../lib/index.js';
import { grantByHand, RELEASE_BY_HAND } from './pg-section.js';

const [design, url, callersText, warmupText, windowText, warmupHoldsText] = process.argv.slice(2) as [string, string, string, string, string, string];
const callers = Number(callersText);
const KEY = 'bench:pg:hot';
const INCREMENT = 'UPDATE bench_counter SET v = v + 1 WHERE id = 1';

/** The by-hand row-lock's key row (a key of its own: the library's row-lock design uses KEY). */
const HAND_KEY = `'\\x${Buffer.from('bench:pg:hot:hand').toString('hex')}'::bytea`;

/** The by-hand lease's key row, and its doorbell (a session advisory lock, as the library's). */
const LEASE_HAND_KEY = `'\\x${Buffer.from('bench:pg:hot:lease-hand').toString('hex')}'::bytea`;
const LEASE_HAND_BELL = 4244;

async function holdOnce(): Promise<() => Promise<void>> {
  if (design === 'lease-by-hand') return leaseByHand();
  if (design === 'row-lock-by-hand') {
    const pool = new pg.Pool({ connectionString: url, max: callers });
    await pool.query(`INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES (${HAND_KEY}, 0, 1) ON CONFLICT (lock_key) DO NOTHING`);
    const take =
      `BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(4243); ` +
      `UPDATE db_lock SET fencing_token = fencing_token + 1, last_granted_at = clock_timestamp() WHERE lock_key = ${HAND_KEY} AND no_lease_holders = 1 RETURNING fencing_token`;
    const audit = (token: string) =>
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, hold_ms) ` +
      `VALUES (${HAND_KEY}, 'write', '00000000-0000-4000-8000-000000000000', 'bench:hand', 'row-lock', ${token}, 'RELEASED', 0, clock_timestamp(), clock_timestamp(), clock_timestamp(), 0); COMMIT`;
    return async () => {
      const client = await pool.connect();
      try {
        const results = (await client.query(take)) as unknown as pg.QueryResult[];
        await client.query(INCREMENT);
        await client.query(audit(String((results[2]!.rows[0] as { fencing_token: string }).fencing_token)));
      } finally {
        client.release();
      }
    };
  }
  if (design === 'for-update' || design === 'advisory') {
    const pool = new pg.Pool({ connectionString: url, max: callers });
    const lock = design === 'for-update' ? `SELECT v FROM bench_counter WHERE id = 1 FOR UPDATE` : `SELECT pg_advisory_xact_lock(4242)`;
    return async () => {
      const client = await pool.connect();
      try {
        await client.query(`BEGIN; ${lock}`);
        await client.query(INCREMENT);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
  }
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, autoLoadEntities: true, poolSize: callers + 2 }),
      DbLockModule.forRoot({ strategy: design as 'lease' | 'row-lock', escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
    ],
  })
  class ContenderApp {}
  const app = await NestFactory.createApplicationContext(ContenderApp, { logger: ['error'] });
  const locks = app.get(LockService);
  const holdOn = (key: string, increment: string) => () =>
    locks.runLocked(key, async () => void (await locks.manager.query(increment)), { timeoutMs: 30_000 });
  await warmUp(holdOn(`${KEY}:warm:${process.pid}`, WARM_INCREMENT));
  return holdOn(KEY, INCREMENT);
}

/** The counter row the warm-up increments (not the measured one). */
const WARM_INCREMENT = 'UPDATE bench_counter SET v = v + 1 WHERE id = 4';

/**
 * The library's call path is long, and V8 optimizes it only after a few thousand calls: with the
 * round's short warm-up alone, a fresh process measured code still being optimized. Holds on a key
 * of this process's own, before the window, one at a time: not contended, so they cost a few
 * seconds, and they run every part of a hold but the wait.
 */
async function warmUp(hold: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < Number(warmupHoldsText); i++) await hold();
}

/**
 * Each caller waits for the bell on a session of its own (as the library's waiters do) and grants
 * itself behind the wait in the same round trip; the work's transaction ends the log row in its
 * COMMIT; the ring follows the commit. Only the bell's holder grants: the bell excludes.
 */
async function leaseByHand(): Promise<() => Promise<void>> {
  const pool = new pg.Pool({ connectionString: url, max: callers });
  await pool.query(
    `INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES (${LEASE_HAND_KEY}, 0, 1) ON CONFLICT (lock_key) DO NOTHING`,
  );
  const sessions: pg.Client[] = [];
  const grant = `SELECT pg_advisory_lock(${LEASE_HAND_BELL}); ${grantByHand(LEASE_HAND_KEY)}`;
  return async () => {
    const session = sessions.pop() ?? (await connected(new pg.Client({ connectionString: url })));
    try {
      const results = (await session.query(grant)) as unknown as pg.QueryResult[];
      const id = String((results[1]!.rows[0] as { id: string }).id);
      const client = await pool.connect();
      try {
        await client.query(`BEGIN; ${INCREMENT}`);
        await client.query(`${RELEASE_BY_HAND(id)}; COMMIT`);
      } finally {
        client.release();
      }
      await session.query(`SELECT pg_advisory_unlock(${LEASE_HAND_BELL})`);
    } finally {
      sessions.push(session);
    }
  };
}

/** The main thread's CPU time so far (user + system), ms; undefined where /proc does not say (not Linux). */
function mainThreadCpuMs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ: /proc reports CPU time in these ticks. */
const CLOCK_TICKS = 100;

async function connected(client: pg.Client): Promise<pg.Client> {
  await client.connect();
  return client;
}

const hold = await holdOnce();
process.stdout.write('READY\n');
// The parent starts every process's window at once: it writes GO when all are ready.
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
const start = performance.now();
const warmEnd = start + Number(warmupText);
const end = warmEnd + Number(windowText);
// The process's CPU time over the window: every thread (JavaScript, garbage collection,
// compilation), and the main thread alone where Linux tells (/proc), in ms.
let cpuAtWarmEnd: NodeJS.CpuUsage | undefined;
let mainAtWarmEnd: number | undefined;
setTimeout(
  () => {
    cpuAtWarmEnd = process.cpuUsage();
    mainAtWarmEnd = mainThreadCpuMs();
  },
  Math.max(0, warmEnd - performance.now()),
);
const waits: number[] = [];
let holds = 0;
await Promise.all(
  Array.from({ length: callers }, async () => {
    while (performance.now() < end) {
      const asked = performance.now();
      await hold();
      if (asked >= warmEnd && performance.now() <= end) {
        holds++;
        waits.push(performance.now() - asked);
      }
    }
  }),
);
const cpu = process.cpuUsage(cpuAtWarmEnd);
const main = mainThreadCpuMs();
const mainCpuMs = main === undefined || mainAtWarmEnd === undefined ? undefined : main - mainAtWarmEnd;
process.stdout.write(`${JSON.stringify({ holds, waits, cpuMs: (cpu.user + cpu.system) / 1000, mainCpuMs })}\n`);
process.exit(0);
