/**
 * Development probe: where a decorated row-lock call spends its client time, by wall-clock marks at
 * the library's boundaries (medians over many calls), between the answer of the locking UPDATE and
 * the work's first statement. `node build/test/bench/probe-marks.js [ops] [lease]`
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { DataSourceTransactions } from '../../lib/core/business-transaction.js';
import { FencedTransaction } from '../../lib/core/fenced-transaction.js';
import { LockObserver } from '../../lib/core/lock-observer.js';
import { HeldLock } from '../../lib/core/held-lock.js';
import { CallChain } from '../../lib/core/call-chain.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { DecoratedWork } from './designs/decorated.js';
import { tapStatements } from '../support/statement-tap.js';

type Proto = Record<string, (...args: unknown[]) => unknown>;
const marks: [string, number][] = [];
const mark = (name: string) => marks.push([name, performance.now()]);
function wrap(target: Proto, name: string, label = name): void {
  const original = target[name]!;
  target[name] = function (this: unknown, ...args: unknown[]) {
    mark(`${label} in`);
    return original.apply(this, args);
  };
}

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_marks');
  const { app, locks } = await createLockApp(db.settings, { janitor: false } as never);
  const ds = app.get(DataSource);
  await ds.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT)');
  await ds.query('INSERT INTO pk VALUES (1, 0)');
  const work = new DecoratedWork(locks);
  tapStatements((sql) => {
    const tag = sql.slice(0, 30).replace(/SET STATEMENT.*?FOR /, '');
    mark(`send ${tag}`);
    return () => mark(`answer ${tag}`);
  });
  const runnerProto = Object.getPrototypeOf(ds.createQueryRunner()) as Proto;
  wrap(runnerProto, 'query', 'runner.query');
  wrap(runnerProto, 'connect', 'runner.connect');
  const { EscapedWriteGuard } = await import('../../lib/integrations/escaped-writes.js');
  wrap(EscapedWriteGuard.prototype as unknown as Proto, 'beforeQuery', 'guard.beforeQuery');
  wrap(HeldLock.prototype as unknown as Proto, 'constructor');
  wrap(LockObserver.prototype as unknown as Proto, 'acquired', 'observer.acquired');
  wrap(CallChain.prototype as unknown as Proto, 'runFenced');
  wrap(DataSourceTransactions.prototype as unknown as Proto, 'runIn');
  wrap(FencedTransaction as unknown as Proto, 'run', 'FencedTransaction.run');
  const ops = Number(process.argv[2] ?? 2000);
  const gaps = new Map<string, number[]>();
  for (let i = 0; i < ops + 100; i++) {
    marks.length = 0;
    mark('call');
    await (process.argv[3] === 'lease' ? work.lease.bind(work) : work.rowLock.bind(work))(
      'probe:marks',
      async (q) => {
        mark('body');
        await q('UPDATE pk SET v = v + 1 WHERE id = 1');
      },
      { acquiredAt: 0, releasingAt: 0 },
    );
    mark('returned');
    if (i < 100) continue;
    for (let j = 1; j < marks.length; j++) {
      const key = `${String(j).padStart(2)} ${marks[j - 1]![0]} -> ${marks[j]![0]}`;
      gaps.set(key, [...(gaps.get(key) ?? []), marks[j]![1] - marks[j - 1]![1]]);
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  for (const [k, xs] of gaps) if (xs.length > ops / 2) console.log(`${(med(xs) * 1000).toFixed(0).padStart(6)} us  ${k}`);
  await app.close();
  await db.drop();
}
void main();
