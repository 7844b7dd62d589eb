import mysql from 'mysql2';
import pg from 'pg';

type Query = (this: unknown, ...args: unknown[]) => unknown;

/**
 * For the development probes, and for tests that print what went out when a count is off: calls
 * `onSend` with the text of every statement any mysql2 connection of this process sends (the
 * library's pool and the DataSource's alike), and the function it returns, if any, when that
 * statement's answer arrives (with its error or result). pg clients' statements too (those sent
 * with a promise for their answer, as the library's PostgreSQL pool sends them).
 */
export function tapStatements(onSend: (sql: string) => ((error: unknown, result?: unknown) => void) | void): void {
  const prototype = (mysql as unknown as { Connection: { prototype: Record<string, Query> } }).Connection.prototype;
  const query = prototype.query!;
  prototype.query = function (this: unknown, ...args: unknown[]) {
    const sql = String(typeof args[0] === 'string' ? args[0] : (args[0] as { sql: string }).sql);
    const onAnswer = onSend(sql);
    const i = args.findIndex((a) => typeof a === 'function');
    if (onAnswer && i >= 0) {
      const callback = args[i] as (...results: unknown[]) => unknown;
      args[i] = (...results: unknown[]) => {
        onAnswer(results[0], results[1]);
        return callback(...results);
      };
    }
    return query.apply(this, args);
  };
  const pgPrototype = pg.Client.prototype as unknown as Record<string, Query>;
  const pgQuery = pgPrototype.query!;
  pgPrototype.query = function (this: unknown, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: unknown } | undefined)?.text;
    const onAnswer = typeof text === 'string' ? onSend(text) : undefined;
    const answer = pgQuery.apply(this, args);
    if (onAnswer && answer instanceof Promise)
      answer.then(
        (result: unknown) => onAnswer(null, result),
        (error: unknown) => onAnswer(error),
      );
    return answer;
  };
}
