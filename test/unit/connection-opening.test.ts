import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import mysql from 'mysql2';
import pg from 'pg';
import { checkoutBound, opensConnection, OPEN_BOUND_MS } from '../../lib/core/connection-opening.js';

/**
 * Whether a checkout opens a connection (never bounded by the caller's budget) or waits for a busy
 * one (bounded), read from the drivers' own pools: fields of a real mysql2 and pg pool, nothing
 * connected. The end-to-end proof is the contract suite's one-try-cold-pool.
 */
describe('connection opening', () => {
  it('mysql2: opens while nothing is free and the pool has room; waits when it is full or one is free', async () => {
    const pool = mysql.createPool({ host: '127.0.0.1', connectionLimit: 2 });
    const fields = pool as unknown as {
      _allConnections: { push(c: unknown): void; shift(): unknown };
      _freeConnections: { push(c: unknown): void; shift(): unknown };
    };
    try {
      assert.equal(opensConnection(pool), true, 'empty pool');
      fields._allConnections.push({});
      assert.equal(opensConnection(pool), true, 'one busy, room for one more');
      fields._freeConnections.push({});
      assert.equal(opensConnection(pool), false, 'one free: taken, not opened');
      fields._freeConnections.shift();
      fields._allConnections.push({});
      assert.equal(opensConnection(pool), false, 'full: waits');
    } finally {
      fields._allConnections.shift();
      fields._allConnections.shift();
      await new Promise<void>((resolve) => pool.end(() => resolve()));
    }
  });

  it('pg: counts the queue ahead of the taker against the idle clients and the room left', async () => {
    const pool = new pg.Pool({ max: 3 });
    const counters = { idleCount: 0, totalCount: 0, waitingCount: 0 };
    for (const name of Object.keys(counters) as (keyof typeof counters)[]) Object.defineProperty(pool, name, { get: () => counters[name] });
    assert.equal(opensConnection(pool), true, 'empty pool');
    Object.assign(counters, { idleCount: 1, totalCount: 1, waitingCount: 0 });
    assert.equal(opensConnection(pool), false, 'an idle client is handed over');
    Object.assign(counters, { idleCount: 1, totalCount: 1, waitingCount: 1 });
    assert.equal(opensConnection(pool), true, 'the one waiting ahead takes the idle client; this one gets a new one');
    Object.assign(counters, { idleCount: 0, totalCount: 2, waitingCount: 1 });
    assert.equal(opensConnection(pool), false, 'the one ahead takes the last room: this one waits');
    Object.assign(counters, { idleCount: 0, totalCount: 3, waitingCount: 0 });
    assert.equal(opensConnection(pool), false, 'full');
    await pool.end();
  });

  it('anything else waits as for a busy pool; checkoutBound gives an opening checkout OPEN_BOUND_MS, a waiting one its deadline (at least leastMs)', () => {
    assert.equal(opensConnection(undefined), false);
    assert.equal(opensConnection({ getConnection() {} }), false);
    const now = performance.now();
    const cold = mysql.createPool({ connectionLimit: 1 });
    const opening = checkoutBound(cold, now + 10);
    assert.ok(opening.opens && opening.bound >= now + OPEN_BOUND_MS);
    cold.end(() => undefined);
    const { opens, bound: waited } = checkoutBound({}, now + 10, 250);
    assert.equal(opens, false);
    assert.ok(waited >= now + 250 && waited < now + 1_000, `${waited - now}`);
  });
});
