import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockStrategyName } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

/**
 * A lock nested inside a row-lock call joins the row-lock's transaction (README "Nested calls"). At
 * REPEATABLE READ the snapshot is taken by the outer work's first read, before the nested lock is
 * granted, so the nested work could read the value from before the previous holder of the nested
 * key committed. The README's remedy: the outer call names READ COMMITTED; then the nested
 * read-modify-write sees the previous holder's commit, and both increments count. The outer call
 * is always a row-lock, so the suite runs on row-lock's target of each server; the nested lock is
 * of either strategy.
 */
contractSuite(
  'holder-connection',
  'a nested lock inside a row-lock call at READ COMMITTED reads after the previous holder of the nested key',
  { postgres: true },
  (target) => {
    let db: TestDatabase;
    before(async () => {
      db = await TestDatabase.forTarget(target);
      await db.query(`CREATE TABLE ledger (k VARCHAR(10) PRIMARY KEY, v INT NOT NULL)${db.sql.tableOptions}`);
    });
    after(async () => {
      await db?.drop();
    });

    for (const inner of ['row-lock', 'lease'] as LockStrategyName[]) {
      it(`outer row-lock, inner ${inner}: two increments of y under lock y both count`, async (t) => {
        const x = `x-${inner}`;
        const y = `y-${inner}`;
        await db.query('INSERT INTO ledger VALUES (?, 0), (?, 0)', [x, y]);
        const a = await createLockApp(db.settings, target.options({ janitor: false }));
        const b = await createLockApp(db.settings, target.options({ janitor: false }));
        try {
          // A holds y and will increment it.
          const heldY = await a.locks.acquire(y, { strategy: inner });
          let outerRead = false;
          const bCall = b.locks.runLocked(
            x,
            async () => {
              // The outer work reads its own key's row (a plain read, as any work does).
              await runSql(b.locks.manager, 'SELECT v FROM ledger WHERE k = ?', [x]);
              outerRead = true;
              // Nested: lock y, then read-modify-write y's row.
              return b.locks.runLocked(
                y,
                async (h) => {
                  const [row] = await runSql<{ v: number }[]>(b.locks.manager, 'SELECT v FROM ledger WHERE k = ?', [y]);
                  await runSql(b.locks.manager, 'UPDATE ledger SET v = ? WHERE k = ?', [Number(row!.v) + 1, y]);
                  return { read: Number(row!.v), token: h.fencingToken };
                },
                { strategy: inner, timeoutMs: 10_000 },
              );
            },
            { strategy: 'row-lock', timeoutMs: 5_000, isolationLevel: 'READ COMMITTED' },
          );
          await eventually(() => outerRead, 5_000, 'outer read');
          await new Promise((r) => setTimeout(r, 200)); // B is now waiting for y
          // A's increment of y, committed while A holds y.
          if (inner === 'row-lock') {
            const [row] = await runSql<{ v: number }[]>(heldY.manager!, 'SELECT v FROM ledger WHERE k = ?', [y]);
            await runSql(heldY.manager!, 'UPDATE ledger SET v = ? WHERE k = ?', [Number(row!.v) + 1, y]);
          } else {
            await db.query('UPDATE ledger SET v = v + 1 WHERE k = ?', [y]);
          }
          await heldY.release();
          const got = await bCall;
          const [final] = await db.query<{ v: number }[]>('SELECT v FROM ledger WHERE k = ?', [y]);
          t.diagnostic(`inner ${inner}: B read ${got.read} under token ${got.token} (A held token ${heldY.fencingToken}); final y = ${final!.v}`);
          assert.equal(
            Number(final!.v),
            2,
            `B's nested hold of ${y} read ${got.read}, the value from before A's committed hold: A's increment was lost`,
          );
        } finally {
          await a.app.close();
          await b.app.close();
        }
      });
    }
  },
);
