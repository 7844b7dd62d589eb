import type { INestApplication } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { LockService } from '../../lib/index.js';
import { readSampleConfig } from '../../sample-app/config/sample-config.js';
import { createSampleApp } from '../../sample-app/create-app.js';
import { TestDatabase, serverUrl } from './test-database.js';

/** The sample app as `npm run sample` builds it, on a fresh empty database of its own. */
export interface SampleApp {
  app: INestApplication;
  /** For supertest. */
  server: ReturnType<INestApplication['getHttpServer']>;
  db: TestDatabase;
  /** The app's own LockService: a test holds locks through it as another request would. */
  locks: LockService;
  close(): Promise<void>;
}

/**
 * Boots the real AppModule (its migrations create every table, it seeds itself) against a new
 * database named `dblock_sample_<pid>_<random>`; `close()` stops the app and drops the database.
 * The reconciliation cron is stopped: a test fires the job when it wants to, never the clock.
 */
export async function startSampleApp(env: { LOCK_TIMEOUT_MS?: string } = {}): Promise<SampleApp> {
  const db = await TestDatabase.create('dblock_sample', { lockTables: false });
  const url = serverUrl();
  url.pathname = `/${db.name}`;
  let app: INestApplication | undefined;
  try {
    app = await createSampleApp(readSampleConfig({ DB_LOCK_SAMPLE_URL: url.href, ...env }), ['error']);
    await app.init();
    await app.get(SchedulerRegistry).getCronJob('reconciliation').stop();
  } catch (error) {
    await app?.close();
    await db.drop();
    throw error;
  }
  const started = app;
  return {
    app: started,
    server: started.getHttpServer(),
    db,
    locks: started.get(LockService),
    async close() {
      try {
        await started.close();
      } finally {
        await db.drop();
      }
    },
  };
}

/** Everything a request could have changed, to compare before and after. */
export async function moneySnapshot(db: TestDatabase): Promise<Record<string, unknown>> {
  const q = (sql: string) => db.query<Record<string, unknown>[]>(sql);
  return {
    loans: await q('SELECT id, outstanding_cents, repaid_cents, repayments FROM p2p_loan ORDER BY id'),
    investors: await q('SELECT id, balance_cents FROM p2p_investor ORDER BY id'),
    claims: await q('SELECT id, investor_id, received_cents, transfers FROM p2p_claim ORDER BY id'),
    repayments: await q('SELECT COUNT(*) AS n FROM p2p_repayment'),
    transfers: await q('SELECT COUNT(*) AS n FROM p2p_claim_transfer'),
  };
}

/** Investor balances by id. */
export async function balances(db: TestDatabase): Promise<Map<number, number>> {
  const rows = await db.query<{ id: number; balance_cents: string }[]>('SELECT id, balance_cents FROM p2p_investor');
  return new Map(rows.map((r) => [r.id, Number(r.balance_cents)]));
}

export interface LogRow {
  id: number;
  key: string;
  mode: string;
  status: string;
  fencingToken: number;
  note: string | null;
  /** Server time, microseconds since the epoch (exact, unlike a JS Date). */
  acquiredUs: number;
  endedUs: number | null;
}

/** Lock log rows whose stored key (namespace 'p2p' included) starts with `prefix`, oldest first. */
export async function logRows(db: TestDatabase, prefix: string): Promise<LogRow[]> {
  const rows = await db.query<Record<string, unknown>[]>(
    `SELECT id, CAST(lock_key AS CHAR) AS k, mode, status, fencing_token, note,
            TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at) AS a, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', ended_at) AS e
       FROM db_lock_log WHERE LEFT(lock_key, ?) = ? ORDER BY id`,
    [Buffer.byteLength(prefix), Buffer.from(prefix)],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    key: String(r.k),
    mode: String(r.mode),
    status: String(r.status),
    fencingToken: Number(r.fencing_token),
    note: r.note === null ? null : String(r.note),
    acquiredUs: Number(r.a),
    endedUs: r.e === null ? null : Number(r.e),
  }));
}

/** Pairs of rows of one key where a writer's [acquired, ended] overlaps anyone else's. */
export function writeOverlaps(rows: readonly LogRow[]): [LogRow, LogRow][] {
  const overlaps: [LogRow, LogRow][] = [];
  for (const a of rows)
    for (const b of rows)
      if (
        a.id < b.id &&
        a.key === b.key &&
        (a.mode === 'write' || b.mode === 'write') &&
        a.acquiredUs < (b.endedUs ?? Infinity) &&
        b.acquiredUs < (a.endedUs ?? Infinity)
      )
        overlaps.push([a, b]);
  return overlaps;
}
