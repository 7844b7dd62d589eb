/**
 * Development probe: the handoff chain of the PostgreSQL hot key, segment by segment. Runs the
 * bench's hot-key contenders (`processes` × `callers` on one key) for one design with every pg
 * query traced (postgres/pg-query-trace.ts), then takes each hold whose grant answered in the
 * window and prints the median of each step: from the grant's answer to the next statement, each
 * statement's round trip, the gaps between them, and from a holder's ring (its advisory unlock
 * sent) to the next grant answered in another process. Their sum is the time one handoff takes;
 * the window's holds per second is about its inverse.
 * `node build/test/bench/probe-pg-chain.js [lease|lease-by-hand|row-lock|row-lock-by-hand|for-update]`; BENCH_PROCESSES, BENCH_CALLERS.
 */
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { counterDatabase } from './postgres/pg-contention.js';
import { runProbe } from './probe-main.js';
import { median } from './stats.js';

const CHILD = fileURLToPath(new URL('./postgres/pg-contender.child.js', import.meta.url));
const TRACE = fileURLToPath(new URL('./postgres/pg-query-trace.js', import.meta.url));
const WARMUP_MS = 1000;
const WINDOW_MS = 3000;

/** What each design's hold sends, in order after its grant (first characters of each batch). */
const STEPS: Record<string, { grant: string; after: string[]; ring: string }> = {
  lease: {
    grant: 'WITH w AS MATERIALIZED',
    after: ['BEGIN ISOLATION LEVEL', 'UPDATE bench_counter', 'WITH ended AS'],
    ring: 'SELECT pg_advisory_unlock',
  },
  'lease-by-hand': {
    grant: 'SELECT pg_advisory_lock(',
    after: ['BEGIN; UPDATE bench_counter', 'UPDATE db_lock_log'],
    ring: 'SELECT pg_advisory_unlock',
  },
  // Row-lock holds have no ring: the COMMIT batch (audit row, COMMIT) frees the key.
  'row-lock': { grant: 'BEGIN; SELECT set_config', after: ['UPDATE bench_counter'], ring: 'INSERT INTO db_lock_log' },
  'row-lock-by-hand': { grant: 'BEGIN ISOLATION LEVEL', after: ['UPDATE bench_counter'], ring: 'INSERT INTO db_lock_log' },
  'for-update': { grant: 'BEGIN; SELECT v FROM', after: ['UPDATE bench_counter'], ring: 'COMMIT' },
};

type Trace = [number, number, string];

async function main(): Promise<void> {
  const design = process.argv[2] ?? 'lease';
  const steps = STEPS[design];
  if (!steps) throw new Error(`no design '${design}': one of ${Object.keys(STEPS).join(', ')}`);
  const processes = Number(process.env.BENCH_PROCESSES ?? 4);
  const callers = Number(process.env.BENCH_CALLERS ?? 4);
  const db = await counterDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'pg-chain-'));
  try {
    const children = Array.from({ length: processes }, () =>
      spawn(process.execPath, ['--import', TRACE, CHILD, design, db.url, String(callers), String(WARMUP_MS), String(WINDOW_MS)], {
        stdio: ['pipe', 'pipe', 'inherit'],
        env: { ...process.env, PG_TRACE_DIR: dir },
      }),
    );
    const outputs = children.map((child) => {
      let text = '';
      child.stdout.on('data', (chunk) => (text += String(chunk)));
      return { child, text: () => text, exited: new Promise((resolve) => child.once('exit', resolve)) };
    });
    while (!outputs.every((o) => o.text().includes('READY'))) await new Promise((resolve) => setTimeout(resolve, 50));
    const startedAt = performance.timeOrigin + performance.now();
    for (const o of outputs) o.child.stdin.end('GO\n');
    await Promise.all(outputs.map((o) => o.exited));
    const holds = outputs.reduce((n, o) => n + (JSON.parse(o.text().trim().split('\n').pop()!) as { holds: number }).holds, 0);
    const traces = readdirSync(dir).map((file) => (JSON.parse(readFileSync(join(dir, file), 'utf8')) as Trace[]).map((t) => ({ t, file })));
    report(steps, traces, startedAt + WARMUP_MS, startedAt + WARMUP_MS + WINDOW_MS);
    process.stdout.write(`${design}: ${Math.round(holds / (WINDOW_MS / 1000))} holds/s (traced)\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await db.drop();
  }
}

function report(steps: (typeof STEPS)[string], traces: { t: Trace; file: string }[][], from: number, to: number): void {
  const segments = new Map<string, number[]>();
  const add = (name: string, ms: number) => (segments.get(name) ?? segments.set(name, []).get(name)!).push(ms);
  const is = (t: Trace, prefix: string) => t[2].startsWith(prefix);
  for (const process of traces) {
    const list = process.map((p) => p.t).sort((a, b) => a[0] - b[0]);
    for (const grant of list) {
      if (!is(grant, steps.grant) || grant[1] < from || grant[1] > to) continue;
      // This hold's statements: the first of each kind sent after its grant answered, in order.
      let previous: Trace = grant;
      let complete = true;
      const chain: [string, Trace][] = [];
      for (const prefix of [...steps.after, steps.ring]) {
        const next = list.find((t) => t[0] >= previous[1] - 0.001 && is(t, prefix));
        if (!next) {
          complete = false;
          break;
        }
        chain.push([prefix, next]);
        previous = next;
      }
      if (!complete) continue;
      let answered = grant[1];
      let last = 'grant';
      for (const [prefix, t] of chain) {
        add(`${last} answered → ${prefix} sent`, t[0] - answered);
        add(`${prefix} round trip`, t[1] - t[0]);
        answered = t[1];
        last = prefix;
      }
    }
  }
  // A ring wakes the next waiter in line, in whichever process: its grant answers next.
  const all = traces.flat().map((p) => p.t);
  const grants = all.filter((t) => is(t, steps.grant)).sort((a, b) => a[1] - b[1]);
  for (const ring of all.filter((t) => is(t, steps.ring) && t[0] >= from && t[0] <= to)) {
    const next = grants.find((g) => g[1] > ring[0]);
    if (next) add('ring sent → next grant answered', next[1] - ring[0]);
  }
  let cycle = 0;
  for (const [name, values] of segments) {
    const m = median(values);
    if (!name.endsWith(`${steps.ring} round trip`)) cycle += m;
    process.stdout.write(`${m.toFixed(3).padStart(8)} ms  ${name} (${values.length})\n`);
  }
  process.stdout.write(`${cycle.toFixed(3).padStart(8)} ms  one handoff (the sum, without the ring's own answer)\n`);
}

runProbe(main);
