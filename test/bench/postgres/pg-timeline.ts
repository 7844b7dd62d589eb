import pg from 'pg';

type Method = (...args: unknown[]) => Promise<unknown>;

/** What a probe's timeline may mark besides the statements: its own points, and the calls of chosen methods. */
export interface TimelineMarks {
  /** Notes `label` at the current time of the op. */
  note(label: string): void;
  /** Notes `method`'s call and its settlement on `target` (restored when the timeline ends). */
  wrap(target: object, method: string): void;
}

/**
 * Development probes on PostgreSQL: when each statement of an op is sent and answered (pg's
 * `Client.query` watched), and when the marks of `marking` fall, relative to the op's start: the
 * median over `ops` ops after `warmup` unrecorded ones, printed with the op's client CPU.
 */
export async function printTimeline(
  name: string,
  op: () => Promise<unknown>,
  marking: (marks: TimelineMarks) => void = () => undefined,
  { ops = 200, warmup = 50 } = {},
): Promise<void> {
  let t0 = 0;
  const at = new Map<string, number[]>();
  const note = (label: string): void => void at.set(label, [...(at.get(label) ?? []), performance.now() - t0]);
  const restore: (() => void)[] = [];
  const wrap = (target: object, method: string): void => {
    const methods = target as Record<string, Method>;
    const before = methods[method]!;
    methods[method] = function (this: unknown, ...args: unknown[]) {
      note(`${method} called`);
      const result = before.apply(this, args);
      void result.then(
        () => note(`${method} resolved`),
        () => undefined,
      );
      return result;
    };
    restore.push(() => (methods[method] = before));
  };
  const query = pg.Client.prototype.query as (...a: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: unknown, config: unknown, ...rest: unknown[]) {
    const label = (typeof config === 'string' ? config : String((config as { text?: string }).text ?? '')).replace(/\s+/g, ' ').slice(0, 40);
    note(`send ${label}`);
    const answer = query.call(this, config, ...rest);
    if (answer instanceof Promise)
      void answer.then(
        () => note(`answer ${label}`),
        () => undefined,
      );
    return answer;
  } as never;
  restore.push(() => (pg.Client.prototype.query = query as never));
  marking({ note, wrap });
  let cpu = process.cpuUsage();
  try {
    for (let i = 0; i < warmup + ops; i++) {
      if (i === warmup) {
        at.clear();
        cpu = process.cpuUsage();
      }
      t0 = performance.now();
      await op();
      note('end');
    }
  } finally {
    for (const undo of restore.reverse()) undo();
  }
  const used = process.cpuUsage(cpu);
  console.log(`${name}: client CPU ${((used.user + used.system) / ops / 1000).toFixed(3)} ms/op`);
  for (const [label, times] of [...at].sort((a, b) => median(a[1]) - median(b[1])))
    console.log(`  ${median(times).toFixed(3).padStart(7)} ms  ${label} (${times.length})`);
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}
