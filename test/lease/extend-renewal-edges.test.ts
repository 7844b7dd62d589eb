import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2';
import pg from 'pg';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { partsOf } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

type Query = (this: unknown, ...args: unknown[]) => unknown;

/**
 * A lease holder's extend() and its process's renewals at their edges: an extend that lands after
 * the holder's own release, two extends at once, a renewal interval close to the lease, and an
 * ended-rows check that fails once.
 */
contractSuite('lease-renewal', 'extend and renewals at their edges', { postgres: true }, (target) => {
  describe('an extend and a release at once', () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    const events: { type: string; keys?: readonly string[] }[] = [];

    before(async () => {
      db = await TestDatabase.forTarget(target);
      ({ app, locks } = await createLockApp(db.settings, {
        janitor: false,
        onEvent: (e: { type: string; keys?: readonly string[] }) => events.push(e),
      } as never));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    /**
     * extend() is on the wire (a slow round trip, simulated by holding its statement back) when the
     * holder's own release() lands: nobody took the lock over, the holder gave it back itself. The
     * extend may fail, but the lock must not be reported 'lost' (event, stats.lost, signal aborted
     * with "another holder took it over"): it was released.
     */
    it('an extend answered after the holder released the lock does not report a loss', async () => {
      const log = partsOf(locks).store.log;
      const original = log.extend.bind(log);
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      log.extend = async (rowIds, leaseMs) => {
        await gate;
        return original(rowIds, leaseMs);
      };
      try {
        const handle = await locks.acquire('edge:extend-release', { leaseMs: 10_000 });
        const lostBefore = locks.stats().lost;
        const extending = handle.extend(20_000).then(
          () => undefined,
          (e: unknown) => e,
        );
        await handle.release(); // ends its rows while the extend waits
        open();
        const extendError = await extending;
        await sleep(50);
        const rows = await db.logRows('edge:extend-release');
        assert.deepEqual(
          rows.map((r) => r.status),
          ['RELEASED'],
          'the holder released it; nobody took it over',
        );
        assert.equal(handle.released, true);
        assert.equal(locks.stats().lost - lostBefore, 0, `stats.lost counted a loss (extend answered: ${String(extendError)})`);
        assert.deepEqual(
          events.filter((e) => e.type === 'lost').map((e) => e.keys),
          [],
          'a lost event was emitted for a lock its holder released',
        );
        assert.equal(handle.signal.aborted, false, `signal aborted: ${String(handle.signal.reason)}`);
      } finally {
        log.extend = original;
      }
    });
  });

  /**
   * Two extends of one handle in flight: extend(60 s) runs first on the server, extend(1 s) after it,
   * but the first one's answer reaches the process last (a slow answer, simulated by holding it back
   * in the client). The database now counts a 1 s lease (renewed_at/expires_at + 1 s). README: the
   * signal "aborts, with a LockLostError as its reason, no later than" the moment the database may
   * let another holder in. So once another process got the key, our signal must be aborted.
   */
  it('concurrent extends answered out of order: the signal still aborts before another process gets the key', async () => {
    const db = await TestDatabase.forTarget(target);
    const a = await createLockApp(db.settings, { janitor: false });
    const b = await createLockApp(db.settings, { janitor: false });
    const log = partsOf(a.locks).store.log;
    const original = log.extend.bind(log);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let firstRan!: () => void;
    const ran = new Promise<void>((r) => (firstRan = r));
    let calls = 0;
    log.extend = async (rowIds, leaseMs) => {
      if (calls++ > 0) return original(rowIds, leaseMs);
      const rows = await original(rowIds, leaseMs); // executed on the server
      firstRan();
      await gate; // its answer arrives late
      return rows;
    };
    try {
      const handle = await a.locks.acquire('edge:extend-order', { leaseMs: 3_000 });
      const long = handle.extend(60_000);
      await ran;
      // The second extend is asked while the first one's answer is still on its way.
      const short = handle.extend(1_000);
      await sleep(200);
      open();
      await Promise.all([long, short]);
      const [row] = await db.logRows('edge:extend-order');
      // Server lease is 1 s; renewals (if any) at most every ~1 s: by 4 s the key is surely free on the server (margin 2 s).
      await sleep(4_000);
      const other = await b.locks.tryAcquire('edge:extend-order');
      const aborted = handle.signal.aborted;
      assert.ok(
        other === null || aborted,
        `two holders: process B got the key (server lease_ms ${row?.lease_ms}) while A's signal is not aborted (A thinks its lease is ${60_000} ms)`,
      );
      await other?.release();
    } finally {
      log.extend = original;
      await a.app.close();
      await b.app.close();
      await db.drop();
    }
  });

  /**
   * README options table: `renewIntervalMs` is valid from 10 up to anything shorter than `leaseMs`.
   * A value the module accepts must keep a healthy holder: here renewals every 1990 ms asked for, and
   * locks whose leases (2000 ms, 2010 ms) cannot fit two such intervals before they give themselves
   * up (lease − 10 ms − 1 %): they are renewed every third of their lease instead. Margin: a lock
   * gives itself up ~1.97 s after its last confirmed renewal, renewals come every ~0.67 s, so a
   * loaded host has ~1.3 s of slack. Held 2.5 leases.
   */
  it('renewIntervalMs accepted by the options keeps healthy holders whose leases cannot fit two such intervals', async () => {
    const db = await TestDatabase.forTarget(target);
    const { app, locks } = await createLockApp(db.settings, { janitor: false, leaseMs: 30_000, renewIntervalMs: 1_990 });
    try {
      const handles = [await locks.acquire('edge:interval', { leaseMs: 2_000 }), await locks.acquire('edge:interval-b', { leaseMs: 2_010 })];
      await sleep(5_000);
      assert.deepEqual(
        handles.map((h) => (h.signal.aborted ? `lost: ${String(h.signal.reason)}` : 'kept')),
        ['kept', 'kept'],
      );
      for (const h of handles) await h.release();
    } finally {
      await app.close();
      await db.drop();
    }
  });

  /**
   * README: a lease holder's signal "also aborts when the lock is taken over, force-released, ...".
   * Process A holds two keys; process B force-releases one of them. A's next renewal reads a new
   * ended_count and checks which of its rows were ended; that check's connection is cut by the
   * server (KILL CONNECTION) just as it goes out: a transient failure. The loss must still reach the
   * holder at a later renewal (renewals every 500 ms; we wait 3 s = 6 renewals), the other lock kept.
   */
  it("a force-released lock is still reported lost when the renewal's ended-rows check fails once", async () => {
    const db = await TestDatabase.forTarget(target);
    const a = await createLockApp(db.settings, { janitor: false, leaseMs: 1_500 });
    const b = await createLockApp(db.settings, { janitor: false, leaseMs: 1_500 });
    let cut = process.env.EDGE_CONTROL ? 1 : 0; // control: no cut
    // The connection is cut (network, KILL) right as the check is sent.
    const restore = cutAsSent(db, /^SELECT id FROM \S*db_lock_log\S* WHERE id IN .* AND status NOT IN/, () => cut === 0 && ++cut === 1);
    try {
      const evicted = await a.locks.acquire('edge:evicted');
      const kept = await a.locks.acquire('edge:kept');
      await b.locks.forceRelease('edge:evicted', 'operator');
      await sleep(3_000);
      if (!process.env.EDGE_CONTROL) assert.equal(cut, 1, 'the ended-rows check was sent and cut once');
      assert.equal(kept.signal.aborted, false, 'the other lock is kept');
      assert.equal(
        evicted.signal.aborted,
        true,
        'the force-released lock still looks held to its holder after 6 renewals (its rows are ended; anyone may take the key)',
      );
      await kept.release();
    } finally {
      restore();
      await a.app.close();
      await b.app.close();
      await db.drop();
    }
  });
});

/**
 * Until the returned function is called, every statement matching `pattern` that `cutNow()` lets
 * through has its connection cut (destroyed) as it is sent: mysql2's connections on MySQL, pg's on PostgreSQL.
 */
function cutAsSent(db: TestDatabase, pattern: RegExp, cutNow: () => boolean): () => void {
  const prototype = (
    db.type === 'postgres' ? pg.Client.prototype : (mysql as unknown as { Connection: { prototype: unknown } }).Connection.prototype
  ) as Record<string, Query>;
  const query = prototype.query!;
  prototype.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { sql?: string; text?: string };
    const sql = typeof first === 'string' ? first : String(first.sql ?? first.text);
    if (pattern.test(sql) && cutNow()) {
      if (db.type === 'postgres') (this as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
      else (this as { destroy(): void }).destroy();
    }
    return query.apply(this, args);
  };
  return () => (prototype.query = query);
}
