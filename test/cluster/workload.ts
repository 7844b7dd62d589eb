import { setTimeout as sleep } from 'node:timers/promises';
import { BusinessError, type SectionCall, type Sections, wall } from './sections.js';
import type { Lib } from './target.js';
import type { Belief, ErrorSample, LoopReport, LoopSpec, SectionKind, WorkerSettings } from './types.js';

/** The errno or code of a driver error, looked for along the cause chain (TypeORM wraps it in driverError). */
export function driverCode(error: unknown, depth = 0): string {
  if (error === null || typeof error !== 'object' || depth > 5) return '-';
  const e = error as { errno?: unknown; code?: unknown; driverError?: unknown; cause?: unknown };
  if (typeof e.errno === 'number') return `${e.errno}${typeof e.code === 'string' ? ` ${e.code}` : ''}`;
  if (typeof e.code === 'string') return e.code;
  const inner = e.driverError ?? e.cause;
  if (inner !== undefined) return driverCode(inner, depth + 1);
  return '-';
}

/** How an error a caller saw is counted: the library's typed errors by class, reason and driver code; the section's own; anything else is untyped. */
export function tagOf(error: unknown, lib: Lib): string {
  if (error instanceof BusinessError) return `business${error.afterLoss ? '-after-loss' : ''}/${driverCode(error.original)}`;
  if (error instanceof lib.DbLockError) {
    // DbLockConnectionError says which failure it was; other classes' reasons are sentences (kept in the samples).
    const reason = error.name === 'DbLockConnectionError' ? String((error as { reason?: unknown }).reason) : '-';
    return `${error.name}/${reason}/${driverCode(error.cause)}`;
  }
  return `UNTYPED/${(error as Error)?.name ?? typeof error}/${driverCode(error)}`;
}

const MIXED: readonly SectionKind[] = ['withLock', 'fenced', 'rowLock'];

/**
 * The loops of one worker: each caller repeats its section until told to stop, and every outcome
 * is counted. An error is followed by a short pause (a dead node must not turn a caller into a
 * busy loop).
 */
export class Workload {
  private stopping = false;
  private readonly sections: Record<string, number> = {};
  private readonly errors: Record<string, number> = {};
  private readonly errorLog: ErrorSample[] = [];
  private readonly completions: number[] = [];
  private readonly stalls: [number, number][] = [];
  private longestCallMs = 0;
  private longestCallEnd = 0;

  constructor(
    private readonly lib: Lib,
    private readonly settings: WorkerSettings,
    private readonly impl: Sections,
    private readonly beliefs: Belief[],
  ) {}

  async run(loops: readonly LoopSpec[]): Promise<LoopReport> {
    const callers: Promise<void>[] = [];
    loops.forEach((spec, n) => {
      for (let c = 0; c < spec.callers; c++) callers.push(this.loop(spec, n + c));
    });
    await Promise.all(callers);
    return {
      worker: this.settings.name,
      node: this.settings.node,
      sections: this.sections,
      errors: this.errors,
      errorLog: this.errorLog,
      completions: this.completions,
      stalls: this.stalls,
      longestCallMs: this.longestCallMs,
      longestCallEnd: this.longestCallEnd,
      beliefs: this.beliefs,
    };
  }

  stop(): void {
    this.stopping = true;
  }

  private kinds(spec: LoopSpec): readonly SectionKind[] {
    if (spec.kind !== 'mixed') return [spec.kind];
    return MIXED.filter((kind) => kind !== 'rowLock' || this.impl.rowLock);
  }

  private async loop(spec: LoopSpec, offset: number): Promise<void> {
    if (spec.kind === 'heartbeat') return this.heartbeat();
    const kinds = this.kinds(spec);
    const call: SectionCall = { key: spec.key, gapMs: spec.gapMs, short: spec.lease === 'short' };
    for (let i = offset; !this.stopping; i++) {
      const kind = kinds[i % kinds.length]!;
      const run = this.impl[kind as 'withLock'];
      if (!run) return;
      const started = wall();
      try {
        await run(call);
        const ended = wall();
        this.sections[kind] = (this.sections[kind] ?? 0) + 1;
        this.completions.push(ended);
        this.noteCall(started, ended);
      } catch (error) {
        this.noteCall(started, wall());
        const tag = tagOf(error, this.lib);
        this.errors[tag] = (this.errors[tag] ?? 0) + 1;
        this.errorLog.push({ tag, key: spec.key, at: wall(), message: String((error as Error)?.message ?? error).slice(0, 300) });
        await sleep(50 + Math.random() * 50);
      }
    }
  }

  /** Timed autocommit writes, outside the error tally (they take no lock). */
  private async heartbeat(): Promise<void> {
    while (!this.stopping) {
      const started = wall();
      await this.impl.heartbeat().catch(() => undefined);
      const ms = wall() - started;
      if (ms > 500) this.stalls.push([wall(), ms]);
      await sleep(100);
    }
  }

  private noteCall(started: number, ended: number): void {
    if (ended - started <= this.longestCallMs) return;
    this.longestCallMs = ended - started;
    this.longestCallEnd = ended;
  }
}
