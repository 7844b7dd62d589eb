/**
 * For each contention target: where the same hold's statements sent by hand (no client code
 * between them) stand against it in this run. A target whose by-hand floor lies outside it is
 * bounded on this host by the statements themselves, before any client work; one whose floor lies
 * inside it is missed by the library's own work, and only a change of design or of that work can
 * meet it.
 */
import { fmt, fmtRatio } from '../stats.js';
import type { DesignId } from '../designs/index.js';
import { type BenchResults, twoCommitBound, variantName } from './results.js';

interface FloorCase {
  readonly what: string;
  /** The library's figure and its by-hand floor's, as ratios to the target's baseline. */
  readonly library: number;
  readonly floor: number;
  readonly limit: number;
  /** True: the figure must stay at or below the limit (a wait); false: at or above it (a throughput). */
  readonly atMost: boolean;
  readonly floorWhat: string;
}

function verdictOf(c: FloorCase): string {
  const inside = c.atMost ? c.floor <= c.limit : c.floor >= c.limit;
  const met = c.atMost ? c.library <= c.limit : c.library >= c.limit;
  const where = inside
    ? met
      ? 'inside the target, and the library meets it'
      : "inside the target: the statements allow it, so what misses it is the library's own work or its design"
    : "outside the target: on this host the statements themselves miss it before any client code runs; a design with fewer or cheaper statements on the handoff's path is what could meet it";
  return `${c.what}: the library ${fmtRatio(c.library)}, ${c.floorWhat} ${fmtRatio(c.floor)}, the target ${c.atMost ? '≤' : '≥'} ${fmt(c.limit)}×. That floor lies ${where}.`;
}

export function contentionFloorLines(r: BenchResults): string[] {
  const lines: string[] = [];
  const commit = r.uncontended?.get('pk-update')?.latency.median;
  for (const v of r.contention?.variants ?? []) {
    const d = (id: DesignId) => v.byDesign.get(id);
    const forUpdate = d('for-update');
    if (!forUpdate) continue;
    const cases: FloorCase[] = [];
    const [lease, leaseHand] = [d('lease'), d('lease-hand')];
    if (lease && leaseHand) {
      const floorWhat = "its hold's statements by hand";
      const tp = (f: typeof lease) => f.throughput.median / forUpdate.throughput.median;
      cases.push({ what: 'Lease, throughput × `FOR UPDATE`', library: tp(lease), floor: tp(leaseHand), limit: 0.4, atMost: false, floorWhat });
      if (commit !== undefined) {
        const bound = twoCommitBound(v, commit);
        const of = (f: typeof lease) => f.throughput.median / bound;
        cases.push({
          what: 'Lease, throughput × the two-commit bound',
          library: of(lease),
          floor: of(leaseHand),
          limit: 0.8,
          atMost: false,
          floorWhat,
        });
      }
    }
    const [rowLock, rowLockHand] = [d('row-lock'), d('row-lock-hand')];
    if (rowLock && rowLockHand) {
      const against = (what: string, figure: 'throughput' | 'waitP99', limit: number, atMost: boolean): FloorCase => ({
        what,
        library: rowLock[figure].median / forUpdate[figure].median,
        floor: rowLockHand[figure].median / forUpdate[figure].median,
        limit,
        atMost,
        floorWhat: "its hold's statements by hand, audit row included",
      });
      cases.push(
        against('Row-lock, throughput × `FOR UPDATE`', 'throughput', 0.9, false),
        against("Row-lock, wait p99 × `FOR UPDATE`'s", 'waitP99', 2, true),
      );
    }
    if (cases.length > 0) lines.push(`- **Floors under contention (${variantName(v.pauseMs)}).** ${cases.map(verdictOf).join(' ')}`);
  }
  return lines;
}
