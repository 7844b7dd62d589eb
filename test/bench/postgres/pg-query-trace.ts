/**
 * Loaded with `node --import` into a hot-key contender (see probe-pg-chain.ts): records when each
 * statement batch of pg's Client.query was sent and answered (wall clock, ms since the epoch, so
 * that several processes' records line up), and writes them to PG_TRACE_DIR/trace-<pid>.json when
 * the process exits. Development only: it costs a little per query.
 */
import { writeFileSync } from 'node:fs';
import pg from 'pg';

/** [sent, answered, the statement's first 40 characters (PG_TRACE_CHARS: more)]. */
type Record = [number, number, string];

const dir = process.env.PG_TRACE_DIR;
if (dir) {
  const records: Record[] = [];
  const at = () => performance.timeOrigin + performance.now();
  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: typeof query }).query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text?: string } | undefined;
    const text = (typeof config === 'string' ? config : (config?.text ?? '')).replace(/\s+/g, ' ').slice(0, Number(process.env.PG_TRACE_CHARS ?? 40));
    const sent = at();
    const answer = query.apply(this, args);
    if (answer instanceof Promise)
      answer.then(
        () => records.push([sent, at(), text]),
        () => records.push([sent, at(), `failed: ${text}`]),
      );
    return answer;
  };
  process.on('exit', () => writeFileSync(`${dir}/trace-${process.pid}.json`, JSON.stringify(records)));
}
