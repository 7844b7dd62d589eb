/** The scale sections of the report: many held locks and their renewals, and the big log table. */
import { fmt, fmtFigure, fmtRatio } from '../stats.js';
import { count, ms3, table } from './markdown.js';
import { type BenchResults, latency } from './results.js';

export function scaleSections(r: BenchResults): string[] {
  if (!r.held || !r.logTable) return ['## Scale', '', 'Not run (BENCH_SECTIONS).', ''];
  const { small, large, leaseMs, poolSize } = r.held;
  const out = ['## Scale: many locks held by one process', ''];
  out.push(
    `Two processes, each with a library pool of ${poolSize} connections and the same lease (${leaseMs} ms, renewed every ${leaseMs / 3} ms), the janitor off: one holds ${small.acquired.count} locks, ` +
      `the other ${count(large.acquired.count)}. Their renewals are measured in the same ${r.config.renewalWindowMs} ms windows, ${r.config.rounds} rounds, from \`stats().renewal\` ` +
      '(time renewing = the growth of count × mean over the window, per second of window). Memory after forced GC, one measurement per process. ' +
      "The keys' rows exist beforehand, as for any key used before. \"In the renewal statement\" times the lock log's renewal round trip alone (bench instrumentation); the rest of the renewal time is the process's own work around it.",
    '',
  );
  const rows = [small, large].map((h) => [
    count(h.acquired.count),
    fmt(h.acquired.acquireMs / 1000, 2),
    fmt(h.acquired.roundTripsPerLock, 2),
    `${fmt(h.acquired.heapBytesPerLock, 0)} B`,
    `${fmt(h.acquired.rssBytesPerLock, 0)} B`,
    fmtFigure(h.renewalsPerSecond, 2),
    fmtFigure(h.renewedLocksPerSecond, 0),
    fmtFigure(h.msPerRenewal, 2),
    fmtFigure(h.renewingPerSecond, 2),
    fmtFigure(h.statementPerSecond, 2),
    `${h.released.lost} / ${h.failures}`,
    fmt(h.released.releaseMs / 1000, 2),
  ]);
  out.push(
    ...table(
      [
        'locks held',
        'acquire all (s)',
        'round trips per acquire',
        'heap per lock',
        'RSS per lock',
        'renewal statements/s',
        'locks renewed/s',
        'ms per renewal statement',
        'time renewing (ms/s)',
        'of which in the renewal statement (ms/s)',
        'lost / failed renewals',
        'release all (s)',
      ],
      rows,
    ),
    '',
    `Time renewing with ${count(large.acquired.count)} locks is ${fmtRatio(large.renewingPerSecond.median / small.renewingPerSecond.median)} that with ${small.acquired.count}.`,
    '',
  );
  const lt = r.logTable;
  const pk2 = latency(r, 'pk-update-x2');
  out.push('## Scale: big log table', '');
  out.push(
    `Exclusive acquire + release latency (ms) on a log table holding ${count(lt.rows)} terminal rows (${count(lt.hotKeyRows)} of them on the measured key itself, the rest over 1,000 keys; ` +
      `filled by INSERT … SELECT doubling in ${fmt(lt.fillMs / 1000, 1)} s) vs a fresh table, each in its own database and process, rounds interleaved.`,
    '',
    ...table(
      ['log table', 'latency ms', '× fresh table', '× two PK UPDATEs (uncontended section)'],
      [
        ['fresh', ms3(lt.empty), '1.00×', pk2 ? fmtRatio(lt.empty.median / pk2.median) : 'n/a'],
        [`${count(lt.rows)} rows`, ms3(lt.big), fmtRatio(lt.big.median / lt.empty.median), pk2 ? fmtRatio(lt.big.median / pk2.median) : 'n/a'],
      ],
    ),
    '',
  );
  return out;
}
