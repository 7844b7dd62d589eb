/**
 * Designs whose critical section runs through TypeORM, as a TypeORM app's and the row-lock's
 * (through `handle.manager`) do: the by-hand row-lock hold and the bare `FOR UPDATE` lock as such an
 * app writes it. Beside the library they differ from it by the lock only.
 */
import { RECORD_AND_COMMIT } from '../../../lib/store/mysql/session-routines.sql.js';
import { sessionQuery } from '../../../lib/store/mysql/session-query.js';
import { format } from '../../../lib/store/mysql/sql.js';
import { hostNow } from '../stats.js';
import { countedDesign, OPEN_AND_TAKE, PREPARE_KEY_ROW, tookTheRow } from './blocking.js';
import { managerQuery } from './decorated.js';
import type { DesignDeps, LockDesign } from './types.js';

/**
 * The same hold by hand with its critical section through TypeORM, as the row-lock's runs through
 * `handle.manager`: a runner from the DataSource's pool, the lock's own statements straight to
 * mysql2 on its connection (as the library sends them), the critical section through
 * `runner.manager`. The floor for callers whose work goes through TypeORM: the by-hand floor
 * above sends the critical section on a plain connection, which TypeORM users do not.
 */
export function rowLockByHandOrmDesign(deps: DesignDeps): LockDesign {
  return countedDesign(
    'row-lock-hand-orm',
    2 + 2,
    (key) => deps.dataSource.query(PREPARE_KEY_ROW, [Buffer.from(key)]),
    async (key, body, counter) => {
      const runner = deps.dataSource.createQueryRunner();
      await runner.connect();
      // The lock's own statements as the library sends them: straight to mysql2, past TypeORM's wrapper.
      const raw = (sql: string, params: unknown[] = []): Promise<unknown> => {
        counter.sent++;
        return sessionQuery(runner, format(sql, params));
      };
      try {
        tookTheRow(await raw(OPEN_AND_TAKE, [Buffer.from(key)]), key);
        const acquiredAt = hostNow();
        await body(managerQuery(runner.manager, counter));
        const releasingAt = hostNow();
        await raw(`CALL \`${RECORD_AND_COMMIT}\`(?, 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`, [Buffer.from(key)]);
        return { acquiredAt, releasingAt };
      } catch (error) {
        await raw('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        await runner.release();
      }
    },
  );
}

/**
 * The bare `FOR UPDATE` lock as a TypeORM app writes it by hand: `dataSource.transaction`, the
 * locking read and the critical section through its EntityManager. The same work code as the
 * row-lock's (through `handle.manager`), so the two differ by the lock only.
 */
export function forUpdateOrmDesign(deps: DesignDeps): LockDesign {
  // START TRANSACTION, SELECT … FOR UPDATE, COMMIT + critical section
  return countedDesign(
    'for-update-orm',
    3 + 2,
    (key) => deps.dataSource.query('INSERT IGNORE INTO bench_row_lock (k) VALUES (?)', [key]),
    async (key, body, counter) => {
      const times = { acquiredAt: 0, releasingAt: 0 };
      await deps.dataSource.transaction(async (manager) => {
        counter.sent += 3; // START TRANSACTION, the locking read, COMMIT
        const rows = (await manager.query('SELECT k FROM bench_row_lock WHERE k = ? FOR UPDATE', [key])) as unknown[];
        if (rows.length !== 1) throw new Error(`bench_row_lock has no row '${key}'`);
        times.acquiredAt = hostNow();
        await body(managerQuery(manager, counter));
        times.releasingAt = hostNow();
      });
      return times;
    },
  );
}
