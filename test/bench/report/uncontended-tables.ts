/** The uncontended section of the report: one caller, one key, latency per operation against the floors. */
import { fmt, fmtFigure, fmtRatio } from '../stats.js';
import { chart, ms3, table } from './markdown.js';
import { type BenchResults, latency } from './results.js';

export function uncontendedSection(r: BenchResults): string[] {
  if (!r.uncontended) return ['## Uncontended: one caller, one key', '', 'Not run (BENCH_SECTIONS).', ''];
  const u = (id: string) => latency(r, id)!;
  const select1 = u('select1');
  const pk2 = u('pk-update-x2');
  const out = ['## Uncontended: one caller, one key', ''];
  out.push(
    `Latency per operation (ms), median of each round's ops. Floors: \`SELECT 1\` = ${fmt(select1.median, 3)} ms, two autocommit PK UPDATEs = ${fmt(pk2.median, 3)} ms. ` +
      'Library round trips are counted from `stats().roundTripsBy.locks` plus the statements the DataSource sent (row-lock and fenced transactions), renewals and the janitor left out.',
    '',
  );
  const rows = [...r.uncontended.values()].map((f) => {
    const trips = f.measuredRoundTrips !== undefined ? `${f.item.roundTrips} (measured ${fmt(f.measuredRoundTrips, 2)})` : f.item.roundTrips;
    return [
      f.item.kind,
      f.item.label,
      trips,
      fmtFigure(f.latency, 3),
      fmtRatio(f.latency.median / select1.median),
      fmtRatio(f.latency.median / pk2.median),
    ];
  });
  out.push(...table(['kind', 'operation', 'round trips', 'latency ms', '× `SELECT 1`', '× two PK UPDATEs'], rows), '');

  const write = r.uncontended.get('lease-write')!;
  const grant = write.firstPhase;
  if (grant) {
    out.push(
      `Where the lease's exclusive acquire + release goes: the grant (one INSERT of the log row claiming the key's next token, one commit) ${ms3(grant)} ms, the release (one UPDATE of the log row, one commit) ` +
        `≈ ${fmt(write.latency.median - grant.median, 3)} ms. The same two statements sent by hand, the claim grant's physical floor, cost ` +
        `${fmt(u('claim-floor').median, 3)} ms together, ${fmtRatio(u('claim-floor').median / pk2.median)} two autocommit PK UPDATEs. ` +
        `A grant that must decide (a first grant, a reader, a key others used since) sends START; the deciding UPDATE; INSERT; COMMIT: its floor with the release, ` +
        `${fmt(u('physical-floor').median, 3)} ms, is ${fmtRatio(u('physical-floor').median / pk2.median)}.`,
      '',
    );
  }
  const plain = u('plain-tx').median;
  out.push(
    `Decorator paths: \`@WriteLock\` running one UPDATE costs ${fmtRatio(u('lease-decorated').median / plain)} a plain TypeORM transaction with the same UPDATE (lease: the grant, then the ` +
      `fenced 'requires-new' transaction in whose commit the lock ends) and ${fmtRatio(u('row-lock-decorated').median / plain)} with \`strategy: 'row-lock'\` ` +
      '(the locking transaction: START and the locking UPDATE in one CALL, the UPDATE, the audit row INSERT and COMMIT in another CALL).',
    '',
  );
  const ids = [
    'select1',
    'pk-update-x2',
    'claim-floor',
    'physical-floor',
    'decorated-floor',
    'get-lock',
    'for-update',
    'plain-tx',
    'naive-table',
    'redlock',
    'lease-write',
    'lease-decorated',
    'row-lock-empty',
    'row-lock-decorated',
    'row-lock-floor',
    'row-lock-decorated-floor',
  ];
  const labels = [
    'SELECT 1',
    '2x PK UPDATE',
    'claim floor',
    'full grant floor',
    'decorator floor',
    'GET_LOCK',
    'FOR UPDATE',
    'plain tx',
    'naive table',
    'redlock',
    'lease',
    'lease @WriteLock',
    'row-lock',
    'row-lock @WriteLock',
    'row-lock writes by hand',
    'row-lock @WriteLock floor',
  ];
  out.push(
    ...chart(
      'Uncontended latency by operation (ms, lower is better)',
      'ms',
      labels,
      ids.map((id) => u(id).median),
    ),
    '',
  );
  return out;
}
