/** The contention sections of the report: one table and two charts per variant, and the calibration. */
import type { ContentionVariant } from '../contention.js';
import { DESIGN_IDS, DESIGN_LABELS, SHORT_LABELS } from '../designs/index.js';
import { fmt, fmtFigure, fmtRatio } from '../stats.js';
import { chart, ms, pct, table } from './markdown.js';
import { type BenchResults, latency, variantName } from './results.js';

function calibration(r: BenchResults): string[] {
  const c = r.contention!;
  const rows = c.designs.map((d) => {
    const k = c.calibration.get(d)!;
    return [
      SHORT_LABELS[d],
      String(k.usefulStatements),
      fmt(k.measuredStatementsPerHold, 2),
      fmt(k.roundTripsPerHold, 2),
      String(k.handoffRoundTrips),
    ];
  });
  return [
    '### What one hold costs (useful work)',
    '',
    "Useful statements per hold are what the design sends for one successful hold, critical section included (lease: with the doorbell's GET_LOCK and RELEASE_LOCK, " +
      "which an uncontended hold does not send). They are checked against the server's count over 30 uncontended holds in one worker (that count also includes other clients " +
      'of the server). Useful round trips per hold (client count) are measured over the same holds, plus the round trips a handoff adds (a doorbell rung in a round trip of its own).',
    '',
    ...table(
      [
        'design',
        'useful statements per hold (declared)',
        'statements per uncontended hold (server count)',
        'round trips per uncontended hold (client count)',
        'handoff round trips',
      ],
      rows,
    ),
    '',
  ];
}

function variantSection(r: BenchResults, v: ContentionVariant): string[] {
  const { config } = r;
  const select1 = latency(r, 'select1');
  const out = [`## Contention: ${variantName(v.pauseMs)}`, ''];
  out.push(
    `${config.processes} processes × ${config.callersPerProcess} callers on one key, each looping take the lock → read a counter row, write it back plus one → let go` +
      (v.pauseMs ? ` → pause ${v.pauseMs} ms` : '') +
      ` (lost updates show any overlap). Floor: the same critical section run serially by one caller without a lock, ${fmtFigure(v.serialFloor, 0)} ops/s. ` +
      "Handoff = from the holder beginning to let go (its critical section done) to a caller that was already waiting holding the lock. Waits are censored at the window's end " +
      '(a caller still waiting then counts with what it has waited so far). Same process = share of consecutive holds by callers of the same process, the same caller included ' +
      `(${config.processes * config.callersPerProcess} callers in ${config.processes} processes: ${config.callersPerProcess - 1} of ${config.processes * config.callersPerProcess - 1} other callers would be fair). ` +
      "Waiter statements: server = 'Questions' delta minus the useful statements of the holds; client = round trips the designs sent beyond the useful ones.",
    '',
  );
  const rows = DESIGN_IDS.filter((d) => v.byDesign.has(d)).map((d) => {
    const f = v.byDesign.get(d)!;
    const redis = d === 'redlock';
    return [
      DESIGN_LABELS[d],
      fmtFigure(f.throughput, 0),
      fmtRatio(f.throughput.median / v.serialFloor.median),
      ms(f.waitP50),
      ms(f.waitP99),
      ms(f.handoffP50),
      ms(f.handoffP99),
      select1 ? fmtRatio(f.handoffP50.median / select1.median) : 'n/a',
      pct(f.barging),
      pct(f.sameProcess),
      redis ? `${fmtFigure(f.waiterQps, 0)}; Redis ${fmtFigure(f.redisWaiterCps, 0)} commands/s` : fmtFigure(f.waiterQps, 0),
      redis ? 'n/a (Redis)' : pct(f.waiterShare),
      fmtFigure(f.clientWaiterRtps, 0),
      redis ? 'n/a (Redis)' : pct(f.clientWaiterShare),
      `${f.lostTotal}${f.gaveUpTotal ? ` (${f.gaveUpTotal} LockErrors retried)` : ''}`,
    ];
  });
  out.push(
    ...table(
      [
        'design',
        'throughput ops/s',
        '× serial floor',
        'wait p50 ms',
        'wait p99 ms',
        'handoff p50 ms',
        'handoff p99 ms',
        'handoff p50 × `SELECT 1`',
        'same caller',
        'same process',
        'waiter statements/s (server)',
        'waiter / useful (server)',
        'waiter round trips/s (client)',
        'waiter / useful (client)',
        'lost updates',
      ],
      rows,
    ),
    '',
  );
  const ids = DESIGN_IDS.filter((d) => v.byDesign.has(d));
  const suffix = v.pauseMs ? `, ${v.pauseMs} ms pause` : '';
  out.push(
    ...chart(
      `Throughput under contention${suffix} (ops/s, higher is better)`,
      'ops/s',
      ids.map((d) => SHORT_LABELS[d]),
      ids.map((d) => v.byDesign.get(d)!.throughput.median),
    ),
    '',
  );
  out.push(
    ...chart(
      `Wait p99 under contention${suffix} (ms, lower is better)`,
      'ms',
      ids.map((d) => SHORT_LABELS[d]),
      ids.map((d) => v.byDesign.get(d)!.waitP99.median),
    ),
    '',
  );
  return out;
}

export function contentionSections(r: BenchResults): string[] {
  if (!r.contention) return ['## Contention', '', 'Not run (BENCH_SECTIONS).', ''];
  return [...r.contention.variants.flatMap((v) => variantSection(r, v)), ...calibration(r)];
}
