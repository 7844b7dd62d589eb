import type { LockMode } from './lock-mode.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/** Meter (instrumentation scope) name the instruments are created under. */
export const DB_LOCK_METER_NAME = 'nestjs-db-lock';

/** Instrument names, in OpenTelemetry style: a `db_lock` namespace, units outside the name. */
export const DB_LOCK_INSTRUMENTS = Object.freeze({
  /** Histogram, s: from asking to the grant, timeout or skip (attribute `outcome`). */
  acquireDuration: 'db_lock.acquire.duration',
  /** Histogram, s: from the grant to the release or loss (attribute `outcome`: released, lost). */
  holdDuration: 'db_lock.hold.duration',
  /** Counter, {acquisition}: by `outcome` (granted, timed_out, skipped). */
  acquisitions: 'db_lock.acquisitions',
  /** Counter, {lock}: locks lost while held. */
  lost: 'db_lock.lost',
  /** Counter, {commit}: fenced transactions rolled back because their lock was lost. */
  fenceRefused: 'db_lock.fence.refused',
  /** Counter, {holder}: expired holders reclaimed (by a grant, or the janitor: no lock attributes). */
  takeovers: 'db_lock.takeovers',
  /** Up-down counter, {lock}: locks this process holds. */
  held: 'db_lock.held',
  /** Up-down counter, {caller}: callers of this process waiting for a lock (as `stats().waiting`). */
  waiting: 'db_lock.waiting',
});

/** Who a figure is about: low-cardinality attributes only (a name, never a filled-in key). */
export interface LockLabels {
  readonly name: string;
  readonly mode: LockMode;
  readonly strategy: LockStrategyName;
}

export type AcquireOutcome = 'granted' | 'timed_out' | 'skipped';

// The few @opentelemetry/api shapes used, written out so the published types never import an
// optional package.
type Attributes = Record<string, string>;
interface Recorder {
  record(value: number, attributes?: Attributes): void;
}
interface Adder {
  add(value: number, attributes?: Attributes): void;
}
interface InstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}
interface MeterLike {
  createHistogram(name: string, options?: InstrumentOptions): Recorder;
  createCounter(name: string, options?: InstrumentOptions): Adder;
  createUpDownCounter(name: string, options?: InstrumentOptions): Adder;
}
interface MetricsApiLike {
  metrics: { getMeter(name: string): MeterLike };
  createNoopMeter(): MeterLike;
}

/** Seconds: lock waits and holds run from sub-millisecond grants to minutes-long jobs. */
const SECOND_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * The OpenTelemetry instruments, fed by the LockObserver only. Created on the meter of the global
 * MeterProvider when the service starts, so an SDK must be registered before that.
 */
export class LockMetrics {
  private readonly acquireDuration: Recorder;
  private readonly holdDuration: Recorder;
  private readonly acquisitions: Adder;
  private readonly lostLocks: Adder;
  private readonly fenceRefusals: Adder;
  private readonly takeoverCount: Adder;
  private readonly held: Adder;
  private readonly waitingCallers: Adder;
  /** Locks counted in `held` and not yet taken out: each leaves once, whether released or lost. */
  private readonly counted = new WeakSet<object>();

  constructor(meter: MeterLike) {
    const seconds = { unit: 's', advice: { explicitBucketBoundaries: SECOND_BUCKETS } };
    const names = DB_LOCK_INSTRUMENTS;
    this.acquireDuration = meter.createHistogram(names.acquireDuration, {
      ...seconds,
      description: 'Time from asking for a lock to its grant, timeout or skip',
    });
    this.holdDuration = meter.createHistogram(names.holdDuration, { ...seconds, description: 'Time a lock was held, until released or lost' });
    this.acquisitions = meter.createCounter(names.acquisitions, { unit: '{acquisition}', description: 'Acquisitions by outcome' });
    this.lostLocks = meter.createCounter(names.lost, {
      unit: '{lock}',
      description: 'Locks lost while held (taken over, force-released, maxHoldMs, not renewable)',
    });
    this.fenceRefusals = meter.createCounter(names.fenceRefused, {
      unit: '{commit}',
      description: 'Fenced transactions rolled back because their lock was lost',
    });
    this.takeoverCount = meter.createCounter(names.takeovers, {
      unit: '{holder}',
      description: 'Expired holders reclaimed by a grant or the janitor',
    });
    this.held = meter.createUpDownCounter(names.held, { unit: '{lock}', description: 'Locks this process holds now' });
    this.waitingCallers = meter.createUpDownCounter(names.waiting, {
      unit: '{caller}',
      description: 'Callers of this process waiting for a lock now (from asking to the verdict)',
    });
  }

  /**
   * The instruments on the global MeterProvider; undefined when @opentelemetry/api is not
   * installed, or when no SDK registered a provider (the API's no-op meter would record nothing,
   * yet every grant would still build its attribute sets).
   */
  static async load(): Promise<LockMetrics | undefined> {
    let api: MetricsApiLike;
    try {
      api = (await import('@opentelemetry/api')) as unknown as MetricsApiLike;
    } catch {
      return undefined;
    }
    const meter = api.metrics.getMeter(DB_LOCK_METER_NAME);
    if (Object.getPrototypeOf(meter) === Object.getPrototypeOf(api.createNoopMeter())) return undefined;
    return new LockMetrics(meter);
  }

  acquired(lock: object, labels: LockLabels, waitedMs: number): void {
    this.attempted(labels, 'granted', waitedMs);
    this.counted.add(lock);
    this.held.add(1, attributes(labels));
  }

  attempted(labels: LockLabels, outcome: AcquireOutcome, waitedMs: number): void {
    const tagged = { ...attributes(labels), outcome };
    this.acquisitions.add(1, tagged);
    this.acquireDuration.record(waitedMs / 1000, tagged);
  }

  ended(lock: object, labels: LockLabels, heldMs: number, outcome: 'released' | 'lost'): void {
    if (!this.counted.delete(lock)) return;
    const plain = attributes(labels);
    this.held.add(-1, plain);
    this.holdDuration.record(heldMs / 1000, { ...plain, outcome });
    if (outcome === 'lost') this.lostLocks.add(1, plain);
  }

  waiting(labels: LockLabels, delta: 1 | -1): void {
    this.waitingCallers.add(delta, attributes(labels));
  }

  fenceRefused(labels: LockLabels): void {
    this.fenceRefusals.add(1, attributes(labels));
  }

  /** `labels` undefined: the janitor's reclaims, which belong to no one lock. */
  takeovers(count: number, labels: LockLabels | undefined): void {
    this.takeoverCount.add(count, labels ? attributes(labels) : {});
  }
}

function attributes(labels: LockLabels): Attributes {
  return { 'lock.name': labels.name, 'lock.mode': labels.mode, 'lock.strategy': labels.strategy };
}
