import { violationsOf } from './checks.js';
import type { PhaseResult } from './phases.js';

/** Figures of one phase, computed from the workers' reports and the checks. */
export interface PhaseFigures {
  readonly name: string;
  readonly seconds: number;
  readonly sections: number;
  readonly perSecond: number;
  readonly byKind: Record<string, number>;
  readonly violations: number;
  readonly errors: Record<string, number>;
  readonly untyped: number;
}

function add(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

export function figures(phase: PhaseResult): PhaseFigures {
  const byKind: Record<string, number> = {};
  const errors: Record<string, number> = {};
  for (const report of phase.reports) {
    add(byKind, report.sections);
    add(errors, report.errors);
  }
  const sections = Object.values(byKind).reduce((a, b) => a + b, 0);
  const seconds = (phase.endedAt - phase.startedAt) / 1000;
  const untyped = Object.entries(errors)
    .filter(([tag]) => tag.startsWith('UNTYPED/'))
    .reduce((n, [, v]) => n + v, 0);
  const violations = phase.verdicts.reduce((n, v) => n + violationsOf(v), 0);
  return { name: phase.name, seconds, sections, perSecond: sections / seconds, byKind, violations, errors, untyped };
}

/** What the workers saw around a node's death. */
export interface KillFigures {
  /** Errors by tag from the kill until 5 s after the node was synced again, split by the worker's node. */
  readonly tallyVictim: Record<string, number>;
  readonly tallySurvivors: Record<string, number>;
  /** Longest stretch with no section completed by any survivor's worker, around the kill (ms). */
  readonly survivorGapMs: number;
  /**
   * The freezes as the survivors' workers saw them: their longest heartbeat commit that began
   * around the kill (the dead node not yet evicted), and the longest that began later, while the
   * restarted node rejoined (its join and its catching up under flow control), in ms.
   */
  readonly deathFreezeMs: number;
  readonly rejoinFreezeMs: number;
  /** Longest single call on a survivor that ended after the kill (ms). */
  readonly survivorLongestCallMs: number;
  /** Sections the victim's workers completed after it was synced again. */
  readonly victimSectionsAfterRejoin: number;
  /** Sections the survivors completed between the freeze's end and the victim's return. */
  readonly survivorSectionsWhileDown: number;
  /** LockLostError seen on the short-lease keys (holders the freeze made lose their locks). */
  readonly lostOnShortLeases: number;
  /** LockLostError seen by the survivors' workers on the long-lease keys (0 when the lease covers the freeze), and their long holds in progress at the kill. */
  readonly survivorsLostOnLongLeases: number;
  readonly longHoldsAtKill: number;
}

export function killFigures(phase: PhaseResult, victim: number): KillFigures {
  const kill = phase.marks.kill ?? phase.startedAt;
  const synced = phase.marks.synced ?? phase.endedAt;
  const tallyVictim: Record<string, number> = {};
  const tallySurvivors: Record<string, number> = {};
  const survivors = phase.reports.filter((r) => r.node !== victim);
  const victims = phase.reports.filter((r) => r.node === victim);
  for (const report of phase.reports) {
    const tally = report.node === victim ? tallyVictim : tallySurvivors;
    for (const e of report.errorLog) if (e.at >= kill && e.at <= synced + 5_000) tally[e.tag] = (tally[e.tag] ?? 0) + 1;
  }
  const times = survivors
    .flatMap((r) => r.completions)
    .filter((t) => t >= kill - 2_000 && t <= synced)
    .sort((a, b) => a - b);
  let gap = 0;
  let previous = kill;
  for (const t of times) {
    if (t >= kill) gap = Math.max(gap, t - previous);
    previous = Math.max(previous, t);
  }
  const lostOnShortLeases = phase.reports
    .flatMap((r) => r.errorLog)
    .filter((e) => e.tag.startsWith('LockLostError/') && e.key.includes(':short-'))
    .filter((e) => e.at >= kill).length;
  const longHoldsAtKill = survivors.flatMap((r) => r.beliefs).filter((b) => b.key.endsWith(':long-hold') && b.from <= kill && b.to >= kill).length;
  const survivorsLostOnLongLeases = survivors
    .flatMap((r) => r.errorLog)
    .filter((e) => e.tag.startsWith('LockLostError/') && !e.key.includes(':short-') && e.at >= kill).length;
  const stalls = survivors.flatMap((r) => r.stalls).map(([end, ms]) => ({ start: end - ms, ms }));
  const deathFreezeMs = Math.max(0, ...stalls.filter((s) => s.start >= kill - 1_000 && s.start < kill + 2_000).map((s) => s.ms));
  const rejoinFreezeMs = Math.max(0, ...stalls.filter((s) => s.start >= kill + 2_000 && s.start <= synced).map((s) => s.ms));
  return {
    longHoldsAtKill,
    deathFreezeMs,
    rejoinFreezeMs,
    survivorsLostOnLongLeases,
    tallyVictim,
    tallySurvivors,
    survivorGapMs: gap,
    survivorLongestCallMs: Math.max(0, ...survivors.filter((r) => r.longestCallEnd >= kill).map((r) => r.longestCallMs)),
    victimSectionsAfterRejoin: victims.flatMap((r) => r.completions).filter((t) => t > synced).length,
    survivorSectionsWhileDown: times.filter((t) => t >= kill + gap && t <= synced).length,
    lostOnShortLeases,
  };
}

export function formatTally(tally: Record<string, number>): string {
  const entries = Object.entries(tally).sort((a, b) => b[1] - a[1]);
  return entries.length === 0 ? 'none' : entries.map(([tag, n]) => `${n}× ${tag}`).join(', ');
}

/** `brief`: one line, and the keys' lines only when they found something. */
export function printPhase(f: PhaseFigures, phase: PhaseResult, log: (line: string) => void, brief = false): void {
  log(`-- phase ${f.name}: ${f.sections} sections in ${f.seconds.toFixed(1)} s = ${f.perSecond.toFixed(1)}/s (${formatTally(f.byKind)}), violations ${f.violations}`);
  for (const v of phase.verdicts) {
    if (brief && violationsOf(v) === 0) continue;
    log(
      `   ${v.key}: ${v.sections} committed, ${v.holds} holder views, overlaps ${v.overlaps}, lost updates ${v.lostUpdates}, same value read ${v.sameValueRead}, ` +
        `token order ${v.tokenOrder}, duplicate tokens ${v.duplicateTokens}, holder overlaps ${v.beliefOverlaps} (log time inversions ${v.logOverlaps}, informational)`,
    );
  }
  if (brief && Object.keys(f.errors).length === 0) return;
  log(`   errors: ${formatTally(f.errors)}`);
  const seen = new Set<string>();
  for (const e of phase.reports.flatMap((r) => r.errorLog)) {
    if (seen.has(e.tag) || e.tag.startsWith('business/1213')) continue;
    seen.add(e.tag);
    log(`     e.g. ${e.tag} on ${e.key}: ${e.message.slice(0, 220)}`);
  }
}
