/**
 * The uncontended section's row-lock floors: a row-lock hold's writes sent by hand, on the
 * DataSource through TypeORM, on a TypeORM runner's connection as the library sends them, and on a
 * plain mysql2 connection.
 */
import { BEGIN_AND_TAKE, RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';
import type { UncontendedDeps, UncontendedItem } from './uncontended-items.js';

/** The key row the hand-sent row-lock writes lock and bump. */
export const ROW_LOCK_FLOOR_KEY = 'bench:u:row-lock-floor';
/** The decorated items' one UPDATE (their floors' too). */
export const UPDATE = 'UPDATE bench_counter SET v = v + 1 WHERE id = 3';

/** A row-lock hold's writes: lock and bump the key row (token in the OK packet), the audit row. */
const ROW_LOCK_WRITES = [
  `UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = '${ROW_LOCK_FLOOR_KEY}'`,
  'INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms) ' +
    `VALUES ('${ROW_LOCK_FLOOR_KEY}', 'write', UUID(), 'bench:floor', 'row-lock', LAST_INSERT_ID(), 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 0, 0)`,
];
/** START and the locking UPDATE of a row-lock hold in one CALL, as the library sends them where the routine is installed. */
const ROW_LOCK_BEGIN_AND_TAKE = `CALL \`${BEGIN_AND_TAKE}\`('${ROW_LOCK_FLOOR_KEY}')`;
/** The audit row and COMMIT of a row-lock hold in one CALL, as the library sends them where the routine is installed. */
const ROW_LOCK_RECORD_AND_COMMIT = `CALL \`${RECORD_AND_COMMIT}\`('${ROW_LOCK_FLOOR_KEY}', 'write', UUID(), 'bench:floor', LAST_INSERT_ID(), 0, 0, 0)`;
/** A statement on a transaction's own (callback) mysql2 connection, past TypeORM's wrapper. */
const rawQuery = (connection: unknown, sql: string): Promise<unknown> =>
  new Promise((resolve, reject) =>
    (connection as { query(sql: string, cb: (e: unknown, r: unknown) => void): void }).query(sql, (e, r) => (e ? reject(e) : resolve(r))),
  );

/** The row-lock floors, in the order the report lists them. */
export function rowLockFloorItems(deps: UncontendedDeps): UncontendedItem[] {
  const { floor, dataSource } = deps;
  return [
    {
      id: 'row-lock-floor',
      label:
        "a row-lock hold's writes by hand on the DataSource: TypeORM `startTransaction()` (the server's default isolation, as the row-lock's); UPDATE key row; INSERT audit row; COMMIT",
      kind: 'floor',
      roundTrips: '4',
      op: async () => {
        const runner = dataSource.createQueryRunner('master');
        try {
          await runner.startTransaction();
          for (const sql of ROW_LOCK_WRITES) await runner.query(sql);
          await runner.commitTransaction();
        } finally {
          await runner.release();
        }
      },
    },
    {
      id: 'row-lock-decorated-floor',
      label:
        "row-lock decorator path's floor: the same UPDATE in a transaction on a TypeORM runner, with the hold's statements sent straight to its connection as the library sends them (START and the locking UPDATE in one CALL of the begin-and-take routine; the UPDATE; the audit row and COMMIT in one CALL of the record-and-commit routine)",
      kind: 'floor',
      roundTrips: '3',
      op: async () => {
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        try {
          const connection = (runner as unknown as { databaseConnection: unknown }).databaseConnection;
          (runner as unknown as { isTransactionActive: boolean }).isTransactionActive = true;
          const answer = (await rawQuery(connection, ROW_LOCK_BEGIN_AND_TAKE)) as Record<string, unknown>[][];
          if (Number(answer[0]?.[0]?.taken) !== 1) throw new Error('the begin-and-take routine did not take the floor key row');
          await runner.manager.query(UPDATE);
          await rawQuery(connection, ROW_LOCK_RECORD_AND_COMMIT);
          (runner as unknown as { isTransactionActive: boolean }).isTransactionActive = false;
        } finally {
          if (runner.isTransactionActive) await runner.rollbackTransaction();
          await runner.release();
        }
      },
    },
    {
      id: 'row-lock-floor-raw',
      label: "a row-lock hold's writes by hand on a plain mysql2 connection: BEGIN; UPDATE key row; INSERT audit row; COMMIT",
      kind: 'floor',
      roundTrips: '4',
      op: async () => {
        await floor.query('BEGIN');
        for (const sql of ROW_LOCK_WRITES) await floor.query(sql);
        await floor.query('COMMIT');
      },
    },
  ];
}
