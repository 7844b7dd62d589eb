import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import type { LockService } from '../../lib/index.js';

/**
 * README (Strategies, Connections): "Row-lock sessions (holders and callers waiting in the database)
 * take at most the DataSource's pool size minus one connection, so a process never deadlocks on its
 * own pool." Two call chains each hold a row-lock (withLock) and take a nested row-lock on another,
 * FREE key (withLock, no fenced transaction to join). Nobody else holds anything: the nested calls
 * must be granted. With the DataSource pool at 3 (2 slots) the two outer holds take every slot and
 * each nested call waits for a slot its own chain holds: a deadlock inside one process, broken only
 * by the nested call's timeout (with timeoutMs: Infinity it never ends).
 */
describe('nested row-lock withLock calls beside each other in one process', () => {
  let db: TestDatabase;
  let locks: LockService;
  let close: () => Promise<void>;
  before(async () => {
    db = await TestDatabase.create();
    const made = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 3 });
    locks = made.locks;
    close = () => made.app.close();
  });
  after(async () => {
    await close?.();
    await db?.drop();
  });

  async function twoChains(tag: string): Promise<{ outcomes: string[]; sessions: number }> {
    let inside = 0;
    let bothIn!: () => void;
    const gate = new Promise<void>((r) => (bothIn = r));
    const chain = (i: number) =>
      locks
        .withLock(`${tag}:outer:${i}`, async () => {
          if (++inside === 2) bothIn();
          await gate; // both outer holds taken before either nests (as under load)
          const t0 = performance.now();
          return locks
            .withLock(`${tag}:inner:${i}`, async () => 'nested ran', { timeoutMs: 2_000 })
            .then(
              (v) => v,
              (e: Error) => `${e.name} after ${(performance.now() - t0).toFixed(0)} ms`,
            );
        })
        .catch((e: Error) => `outer ${e.name}`);
    const outcomes = await Promise.all([chain(1), chain(2)]);
    const waiting = await db.query<{ n: number }[]>(
      `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()`,
      [db.name],
    );
    return { outcomes, sessions: Number(waiting[0]!.n) };
  }

  it('keys used before: two chains, each outer withLock + nested withLock on its own free key, both run', async () => {
    for (const k of ['used:outer:1', 'used:outer:2', 'used:inner:1', 'used:inner:2']) await locks.withLock(k, async () => undefined);
    const { outcomes } = await twoChains('used');
    assert.deepEqual(outcomes, ['nested ran', 'nested ran'], `nested row-locks on disjoint free keys failed: ${outcomes.join(' | ')}`);
  });

  it('first use: two chains, each outer withLock + nested withLock on its own never-used key, both run (no deadlock between disjoint keys)', async () => {
    for (const k of ['new:outer:1', 'new:outer:2']) await locks.withLock(k, async () => undefined);
    const { outcomes } = await twoChains('new');
    assert.deepEqual(
      outcomes,
      ['nested ran', 'nested ran'],
      `two call chains on DISJOINT keys (new:outer:1→new:inner:1, new:outer:2→new:inner:2), nobody else holding anything: ${outcomes.join(' | ')}. ` +
        `The nested takes create their never-used key rows inside the joined transactions; their gap locks deadlock each other and the database rolls one whole transaction back (its outer lock and work lost)`,
    );
  });

  it('one chain on a pool of 2: withLock inside withLock on a free key is granted', async () => {
    const small = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 2 });
    try {
      const t0 = performance.now();
      const outcome = await small.locks
        .withLock('solo:outer', () => small.locks.withLock('solo:inner', async () => 'nested ran', { timeoutMs: 1_500 }))
        .catch((e: Error) => `${e.name} after ${(performance.now() - t0).toFixed(0)} ms`);
      assert.equal(
        outcome,
        'nested ran',
        `a nested row-lock on a free key in a single call chain failed (${outcome}): the outer hold has the only slot (pool 2 − 1) and the nested call waits for it`,
      );
    } finally {
      await small.app.close();
    }
  });
});
