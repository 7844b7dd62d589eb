import type mysql from 'mysql2/promise';
import pg from 'pg';
import { SEED_CLAIMS } from '../lending/seed-data.js';
import type { Outcome } from './load.js';

/** One verdict of the report. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

type Rows = Record<string, unknown>[];
const n = (value: unknown): number => Number(value);

/**
 * Where the checks read: the demo's database, through mysql2 or pg. The SQL is the same on both
 * except where noted; aliases are snake_case because PostgreSQL folds unquoted names to lower case.
 */
export type CheckDb = mysql.Connection | pg.Client;

async function rows(db: CheckDb, sql: string): Promise<Rows> {
  if (db instanceof pg.Client) return (await db.query(sql)).rows as Rows;
  const [result] = await db.query(sql);
  return result as Rows;
}

/**
 * Money: every cent a borrower repaid reached exactly one investor, and every repayment the
 * clients were told about (201) is in the database exactly once.
 */
export async function moneyConserved(db: CheckDb, outcomes: readonly Outcome[]): Promise<Check> {
  const [row] = await rows(
    db,
    `
    SELECT (SELECT SUM(balance_cents - opening_cents) FROM p2p_investor) AS paid_out,
           (SELECT SUM(repaid_cents) FROM p2p_loan) AS repaid,
           (SELECT SUM(received_cents) FROM p2p_claim) AS received,
           (SELECT COALESCE(SUM(cents), 0) FROM p2p_repayment) AS recorded,
           (SELECT COUNT(*) FROM p2p_repayment) AS repayments,
           (SELECT COUNT(*) FROM p2p_loan WHERE outstanding_cents + repaid_cents <> principal_cents) AS loans_off`,
  );
  const accepted = outcomes.filter((o) => o.kind === 'repay' && o.status === 201);
  const acknowledged = accepted.reduce((sum, o) => sum + n(o.body.cents), 0);
  const sums = [n(row!.paid_out), n(row!.repaid), n(row!.received), n(row!.recorded), acknowledged];
  const ok = sums.every((s) => s === sums[0]) && n(row!.repayments) === accepted.length && n(row!.loans_off) === 0;
  return {
    name: 'money conserved',
    ok,
    detail:
      `${accepted.length} repayments, ${acknowledged} cents acknowledged; repaid by loans ${sums[1]}, received by claims ${sums[2]}, ` +
      `paid into investor accounts ${sums[0]}, repayment rows ${sums[3]} (${n(row!.repayments)} rows); loans not adding up: ${n(row!.loans_off)}`,
  };
}

/** Claims: each claim's sales, in fencing-token order, form one unbroken chain ending at its owner. */
export async function ownershipChains(db: CheckDb, outcomes: readonly Outcome[]): Promise<Check> {
  const transfers = await rows(db, 'SELECT claim_id, from_investor_id, to_investor_id FROM p2p_claim_transfer ORDER BY claim_id, fencing_token');
  const claims = await rows(db, 'SELECT id, investor_id, transfers FROM p2p_claim');
  const owner = new Map(SEED_CLAIMS.map((c) => [c.id, c.investorId]));
  let broken = 0;
  for (const t of transfers) {
    if (owner.get(n(t.claim_id)) !== n(t.from_investor_id)) broken++;
    owner.set(n(t.claim_id), n(t.to_investor_id));
  }
  for (const c of claims) if (owner.get(n(c.id)) !== n(c.investor_id)) broken++;
  const accepted = outcomes.filter((o) => o.kind === 'transfer' && o.status === 201).length;
  return {
    name: 'claim sales serialised',
    ok: broken === 0 && transfers.length === accepted,
    detail: `${accepted} sales acknowledged, ${transfers.length} recorded; owner chains broken: ${broken}`,
  };
}

/**
 * The finished holds of the `loan:*` keys, each as its key text and its [start, end] in
 * microseconds since 1970 by the server's clock. The lock key is VARBINARY on MySQL and bytea
 * on PostgreSQL, and each has its own way to turn a time into microseconds.
 */
const HOLDS_SQL = {
  mysql: `
    SELECT CAST(lock_key AS CHAR) AS k, mode,
           TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at) AS a, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', ended_at) AS e
      FROM db_lock_log WHERE lock_key LIKE 'p2p:loan:%' AND status IN ('RELEASED', 'FAILED') ORDER BY k, a`,
  // timestamptz: EXTRACT(EPOCH ...) counts from 1970-01-01 UTC, exact to the microsecond.
  postgres: `
    SELECT convert_from(lock_key, 'UTF8') AS k, mode,
           (EXTRACT(EPOCH FROM acquired_at) * 1000000)::bigint AS a, (EXTRACT(EPOCH FROM ended_at) * 1000000)::bigint AS e
      FROM db_lock_log WHERE lock_key LIKE 'p2p:loan:%'::bytea AND status IN ('RELEASED', 'FAILED') ORDER BY k, a`,
} as const;

/**
 * Exclusion, from the lock log's server timestamps: on each `loan:*` key, the [acquired_at,
 * ended_at] interval of a write hold must not intersect any other hold of that key. Reads may
 * overlap each other; the report says how many did at most.
 */
export async function noOverlap(db: CheckDb): Promise<Check> {
  const holds = await rows(db, db instanceof pg.Client ? HOLDS_SQL.postgres : HOLDS_SQL.mysql);
  let overlaps = 0;
  let maxReaders = 0;
  const keys = new Set<string>();
  let key = '';
  let endAll = -Infinity; // latest end among holds of this key so far
  let endWrite = -Infinity; // latest end among write holds so far
  let readers: number[] = []; // ends of reads still open at the current start
  for (const r of holds) {
    const [start, end, write] = [n(r.a), n(r.e), r.mode === 'write'];
    if (r.k !== key) [key, endAll, endWrite, readers] = [String(r.k), -Infinity, -Infinity, []];
    keys.add(key);
    if (start < (write ? endAll : endWrite)) overlaps++;
    endAll = Math.max(endAll, end);
    if (write) endWrite = Math.max(endWrite, end);
    else {
      readers = [...readers.filter((e) => e > start), end];
      maxReaders = Math.max(maxReaders, readers.length);
    }
  }
  return {
    name: 'repayments never overlap anything on their loan',
    ok: overlaps === 0 && holds.length > 0,
    detail: `${holds.length} holds of ${keys.size} loan keys compared by server time: ${overlaps} overlaps; up to ${maxReaders} transfers/statements held one loan together`,
  };
}

/** Order numbers: every number handed out is distinct, and each is stored once. */
export async function uniqueOrderNumbers(db: CheckDb, outcomes: readonly Outcome[]): Promise<Check> {
  const numbers = outcomes.filter((o) => o.kind === 'order' && o.status === 201).map((o) => String(o.body.orderNumber));
  const [row] = await rows(db, 'SELECT COUNT(*) AS total, COUNT(DISTINCT order_number) AS distinct_numbers FROM p2p_order');
  const sorted = [...numbers].sort();
  return {
    name: 'order numbers unique',
    ok: new Set(numbers).size === numbers.length && n(row!.total) === numbers.length && n(row!.distinct_numbers) === numbers.length,
    detail: `${numbers.length} handed out (${sorted[0]} .. ${sorted[sorted.length - 1]}), ${n(row!.total)} stored, ${n(row!.distinct_numbers)} distinct`,
  };
}

/** Every request got an answer the API documents: no 5xx, no dropped connection, no 400. */
export function expectedAnswers(outcomes: readonly Outcome[]): Check {
  const allowed: Record<string, number[]> = { repay: [201, 409, 423], transfer: [201, 409, 423], order: [201, 409, 423], statement: [200, 423] };
  const unexpected = outcomes.filter((o) => !allowed[o.kind]!.includes(o.status));
  const sample = unexpected.slice(0, 3).map((o) => `${o.kind} -> ${o.status} ${o.error ?? ''}`);
  return {
    name: 'every request answered as documented',
    ok: unexpected.length === 0,
    detail: `${unexpected.length} unexpected ${sample.join('; ')}`,
  };
}

/** After the instances stopped: no hold left live (a graceful stop releases everything). */
export async function nothingLeftHeld(db: CheckDb): Promise<Check> {
  const [row] = await rows(db, `SELECT COUNT(*) AS live FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED')`);
  return { name: 'no lock left held after shutdown', ok: n(row!.live) === 0, detail: `${n(row!.live)} live rows` };
}

/** `RELEASED 812, FAILED 31` */
export async function logCountsByStatus(db: CheckDb): Promise<string> {
  const counts = await rows(db, 'SELECT status, COUNT(*) AS c FROM db_lock_log GROUP BY status ORDER BY c DESC');
  return counts.map((r) => `${String(r.status)} ${n(r.c)}`).join(', ');
}
