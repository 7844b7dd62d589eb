/**
 * The PostgreSQL rows of the report: their targets (the MySQL rows' targets, as ratios against
 * PostgreSQL's own floors in the same run) and the tables they come from.
 */
import type { PgBenchResult } from '../postgres/pg-section.js';
import { PG_DESIGNS } from '../postgres/pg-contention.js';
import { type Figure, fmt, fmtRatio } from '../stats.js';
import { table } from './markdown.js';
import type { TargetCheck } from './targets.js';

const range = (f: Figure, digits = 3): string => `${fmt(f.median, digits)} (${fmt(f.min, digits)}–${fmt(f.max, digits)})`;

/**
 * `a / b` against `limit` (atMost: a/b ≤ limit, else ≥), one row of the targets table; `floor`:
 * the same work's physical floor measured in the run, as a ratio to `b` and the library's to it.
 */
function check(
  target: string,
  a: Figure | undefined,
  b: Figure | undefined,
  limit: number | undefined,
  atMost: boolean,
  unit: string,
  floor?: { readonly figure: Figure | undefined; readonly label: string },
): TargetCheck {
  if (!a || !b)
    return { group: 'PostgreSQL', target, measured: 'not measured (no PostgreSQL server, or its section not run)', verdict: 'not measured' };
  const ratio = a.median / b.median;
  const floorText = floor?.figure
    ? `; floor (${floor.label}) ${fmt(floor.figure.median, 3)} ${unit} = ${fmtRatio(floor.figure.median / b.median)}, the library ${fmtRatio(a.median / floor.figure.median)} of it`
    : '';
  return {
    group: 'PostgreSQL',
    target,
    measured: `${fmtRatio(ratio)} (${fmt(a.median, 3)} vs ${fmt(b.median, 3)} ${unit})${floorText}`,
    verdict: limit === undefined ? 'reported' : (atMost ? ratio <= limit : ratio >= limit) ? 'met' : 'missed',
  };
}

export function postgresChecks(pg: PgBenchResult | undefined): TargetCheck[] {
  const u = (id: string) => pg?.uncontended.get(id)?.latency;
  const c = pg?.contention;
  return [
    check(
      'lease: uncontended acquire + release with its log row ≤ 1.25× two autocommit PK UPDATEs',
      u('pg-lease'),
      u('pg-pk-update-x2'),
      1.25,
      true,
      'ms',
      { figure: u('pg-lease-floor'), label: 'the one-statement grant and the release, by hand' },
    ),
    check(
      'lease: `@WriteLock` path running one UPDATE ≤ 2× the same UPDATE in a plain TypeORM transaction',
      u('pg-lease-decorated'),
      u('pg-plain-tx'),
      2,
      true,
      'ms',
      { figure: u('pg-lease-decorated-floor'), label: 'the one-statement grant by hand, then the plain transaction' },
    ),
    check(
      'row-lock: `@WriteLock` path running one UPDATE ≤ 1.5× the same UPDATE in a plain TypeORM transaction',
      u('pg-row-lock-decorated'),
      u('pg-plain-tx'),
      1.5,
      true,
      'ms',
      { figure: u('pg-row-lock-decorated-floor'), label: "the hold's statements and the UPDATE by hand on a plain connection" },
    ),
    check(
      'row-lock: uncontended `withLock` with an empty fn, vs a bare `SELECT … FOR UPDATE` transaction',
      u('pg-row-lock'),
      u('pg-for-update'),
      undefined,
      true,
      'ms',
    ),
    check(
      'lease: hot key throughput ≥ 0.4× a bare `SELECT … FOR UPDATE` lock',
      c?.get('lease')?.throughput,
      c?.get('for-update')?.throughput,
      0.4,
      false,
      'holds/s',
      {
        figure: c?.get('lease-by-hand')?.throughput,
        label:
          "a hold's statements by hand: the bell wait with the one-statement grant behind it, BEGIN and the increment, the log row's end with COMMIT, the ring",
      },
    ),
    check(
      'row-lock: hot key throughput ≥ 0.9× a bare `SELECT … FOR UPDATE` lock',
      c?.get('row-lock')?.throughput,
      c?.get('for-update')?.throughput,
      0.9,
      false,
      'holds/s',
      { figure: c?.get('row-lock-by-hand')?.throughput, label: "the hold's statements by hand" },
    ),
    check(
      "row-lock: hot key latency p99 ≤ 2× a bare `SELECT … FOR UPDATE` lock's",
      c?.get('row-lock')?.p99,
      c?.get('for-update')?.p99,
      2,
      true,
      'ms',
      { figure: c?.get('row-lock-by-hand')?.p99, label: "the hold's statements by hand" },
    ),
  ];
}

export function postgresSection(pg: PgBenchResult | undefined): string[] {
  if (!pg) return ['## PostgreSQL', '', 'Not measured: no PostgreSQL server answered (DB_LOCK_TEST_PG_URL, else 127.0.0.1:5432).', ''];
  const floorOf: Record<string, string> = {
    'pg-lease': 'pg-pk-update-x2',
    'pg-lease-floor': 'pg-pk-update-x2',
    'pg-lease-decorated-floor': 'pg-plain-tx',
    'pg-row-lock-decorated-floor': 'pg-plain-tx',
    'pg-row-lock': 'pg-for-update',
    'pg-advisory': 'pg-for-update',
    'pg-lease-decorated': 'pg-plain-tx',
    'pg-row-lock-decorated': 'pg-plain-tx',
  };
  const rows = [...pg.uncontended.values()].map((f) => {
    const base = floorOf[f.item.id];
    const baseLatency = base ? pg.uncontended.get(base)?.latency : undefined;
    return [
      f.item.label,
      f.item.kind,
      range(f.latency),
      baseLatency ? `${fmtRatio(f.latency.median / baseLatency.median)} ${pg.uncontended.get(base!)!.item.label}` : '',
      f.item.roundTrips + (f.measuredRoundTrips === undefined ? '' : ` (measured ${fmt(f.measuredRoundTrips, 2)} on the library's pool)`),
    ];
  });
  const lines = [
    '## PostgreSQL',
    '',
    `${pg.server}, same host and run. Uncontended: one caller, one key, items interleaved in blocks of 10 ops; latency per op in ms, median of the rounds (min–max).`,
    '',
    ...table(['item', 'kind', 'latency ms', 'vs its floor', 'round trips per op'], rows),
    '',
  ];
  {
    const base = pg.contention.get('for-update')!;
    lines.push(
      "Hot key: the processes × callers of the contention section on one key, each hold incrementing one counter row; a hold's latency is its wait and the increment. Client CPU per hold: the CPU time of all the contending processes (every thread: JavaScript, garbage collection, compilation; then their main threads alone, from /proc) over the window, per hold; on this 2-core host the clients and the server share the cores, so a design's CPU per hold bounds how many holds the handoff chain gets through.",
      '',
      ...table(
        ['design', 'holds/s', 'vs `FOR UPDATE`', 'latency p99 ms', 'vs `FOR UPDATE`', 'client CPU per hold ms', 'of it main threads ms'],
        PG_DESIGNS.map((d) => {
          const f = pg.contention!.get(d)!;
          return [
            d,
            range(f.throughput, 0),
            fmtRatio(f.throughput.median / base.throughput.median),
            range(f.p99, 1),
            fmtRatio(f.p99.median / base.p99.median),
            range(f.clientCpuPerHold, 2),
            f.mainThreadCpuPerHold ? range(f.mainThreadCpuPerHold, 2) : 'not measured',
          ];
        }),
      ),
      '',
    );
  }
  return lines;
}
