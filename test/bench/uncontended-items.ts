/**
 * What the uncontended section measures, one caller and one key each: the floors (round trip,
 * durable commits, the physical floor of a durable grant and release with an audit row, the bare
 * blocking locks, a plain TypeORM transaction), the peers, the library (lease, decorators,
 * row-lock) and the writes of a row-lock hold sent by hand.
 */
import type mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import { DecoratedWork } from './designs/decorated.js';
import type { Body, DesignId, LockDesign } from './designs/index.js';
import { hostNow } from './stats.js';
import { ROW_LOCK_FLOOR_KEY, rowLockFloorItems, UPDATE } from './uncontended-row-lock-floors.js';

export { ROW_LOCK_FLOOR_KEY };

export type ItemKind = 'floor' | 'peer' | 'library';

export interface UncontendedItem {
  readonly id: string;
  readonly label: string;
  readonly kind: ItemKind;
  /** Round trips per op as designed (library items: also measured). */
  readonly roundTrips: string;
  /** Count the library's round trips (its pool and the DataSource) per op. */
  readonly countsRoundTrips?: boolean;
  /** One operation; may return the duration of its first phase (the grant), in ms. */
  op(): Promise<number | void>;
  /** Runs a whole round inside some context (the reentrant item runs inside withLock). */
  wrapRound?<T>(round: () => Promise<T>): Promise<T>;
}

export interface UncontendedDeps {
  /** A plain connection with multipleStatements, for the floors. */
  floor: mysql.Connection;
  locks: LockService;
  dataSource: DataSource;
  designs: ReadonlyMap<DesignId, LockDesign>;
}

/** The log row and counter the physical floor writes, on a key nothing else uses. */
export const FLOOR_KEY = 'bench:u:floor';
const noop: Body = async () => {};
const oneUpdate: Body = async (query) => void (await query(UPDATE));

/** Round trip 1 of the physical floor: a durable grant with its audit row (db_lock_log and its indexes) and its counter. */
export const GRANT_SHAPE =
  'START TRANSACTION; INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ' +
  `VALUES ('${FLOOR_KEY}', 'write', UUID(), 'bench:floor', 'lease', (@bench_t := COALESCE(@bench_t, 0) + 1), 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0); ` +
  `UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = '${FLOOR_KEY}'; COMMIT`;
/** The key the claim grant's floor inserts log rows for (its tokens claimed in order, from 1). */
export const CLAIM_FLOOR_KEY = 'bench:u:claim-floor';
/**
 * The claim grant's floor: the one statement the library sends for a key it knows free (its own
 * exclusive hold of the key ended), an autocommit INSERT of the log row claiming the next token
 * (unique in (lock_key, token_claim)), with nothing decided around it.
 */
export function claimGrantShape(token: number): string {
  return (
    'INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ' +
    `VALUES ('${CLAIM_FLOOR_KEY}', 'write', UUID(), 'bench:floor', 'lease', ${token}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, 0)`
  );
}
/** Round trip 2: the durable release, one PK UPDATE of that log row. */
export const RELEASE_SHAPE = "UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ?";

export function uncontendedItems(deps: UncontendedDeps): UncontendedItem[] {
  const { floor, locks, dataSource } = deps;
  const work = new DecoratedWork(locks);
  const pkUpdate = (): Promise<unknown> => floor.query('UPDATE bench_counter SET v = v + 1 WHERE id = 2');
  const grantShape = async (): Promise<number> => {
    const [results] = (await floor.query(GRANT_SHAPE)) as unknown as [{ insertId: number }[]];
    return results[1]!.insertId;
  };
  let claimedTokens = 0;
  const claimGrant = async (): Promise<number> => {
    const [result] = (await floor.query(claimGrantShape(++claimedTokens))) as unknown as [{ insertId: number }];
    return result.insertId;
  };
  const design =
    (id: DesignId, key: string, body: Body = noop) =>
    async () =>
      void (await deps.designs.get(id)!.hold(key, 0, body));
  const times = () => ({ acquiredAt: 0, releasingAt: 0 });
  return [
    { id: 'select1', label: '`SELECT 1` round trip', kind: 'floor', roundTrips: '1', op: async () => void (await floor.query('SELECT 1')) },
    { id: 'pk-update', label: 'autocommit PK UPDATE (one durable commit)', kind: 'floor', roundTrips: '1', op: async () => void (await pkUpdate()) },
    {
      id: 'pk-update-x2',
      label: 'two autocommit PK UPDATEs',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        await pkUpdate();
        await pkUpdate();
      },
    },
    {
      id: 'grant-shape',
      label: 'durable grant shape: START; INSERT audit row into db_lock_log; UPDATE counter; COMMIT',
      kind: 'floor',
      roundTrips: '1',
      op: async () => void (await grantShape()),
    },
    {
      id: 'physical-floor',
      label: 'physical floor: the durable grant shape + one PK UPDATE of that log row (durable release)',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        const id = await grantShape();
        await floor.query(RELEASE_SHAPE, [id]);
      },
    },
    {
      id: 'claim-floor',
      label:
        "the claim grant's physical floor: one autocommit INSERT of the log row claiming the key's next token (the statement a grant of a key known free sends), then one PK UPDATE of that row (durable release)",
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        const id = await claimGrant();
        await floor.query(RELEASE_SHAPE, [id]);
      },
    },
    {
      id: 'decorated-floor',
      label: "decorator path's floor: the claim grant's INSERT, then the plain TypeORM transaction with the same UPDATE",
      kind: 'floor',
      roundTrips: '1 + 3',
      op: async () => {
        await claimGrant();
        await dataSource.transaction(async (manager) => {
          await manager.query(UPDATE);
        });
      },
    },
    {
      id: 'get-lock',
      label: '`GET_LOCK` + `RELEASE_LOCK`',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        await floor.query("SELECT GET_LOCK('bench:u:get-lock', 10)");
        await floor.query("SELECT RELEASE_LOCK('bench:u:get-lock')");
      },
    },
    {
      id: 'for-update',
      label: 'bare `BEGIN; SELECT … FOR UPDATE; COMMIT`',
      kind: 'floor',
      roundTrips: '3',
      op: design('for-update', 'bench:u:for-update'),
    },
    {
      id: 'plain-tx',
      label: 'plain TypeORM transaction with one UPDATE (`dataSource.transaction`)',
      kind: 'floor',
      roundTrips: '3',
      op: async () => {
        await dataSource.transaction(async (manager) => {
          await manager.query(UPDATE);
        });
      },
    },
    { id: 'naive-table', label: 'naive table lock (INSERT + DELETE)', kind: 'peer', roundTrips: '2', op: design('naive-table', 'bench:u:naive') },
    { id: 'redlock', label: 'node-redlock lock + unlock (Redis)', kind: 'peer', roundTrips: '2 (Redis)', op: design('redlock', 'bench:u:redlock') },
    {
      id: 'lease-write',
      countsRoundTrips: true,
      label:
        "lease: exclusive acquire + release, audit row (acquire: one INSERT of the log row claiming the key's next token, the key known free since this process's last hold of it; release: one UPDATE of that row)",
      kind: 'library',
      roundTrips: '1 + 1 (1 + 1 statements)',
      op: async () => {
        const t0 = hostNow();
        const lock = await locks.acquire('bench:u:lease');
        const granted = hostNow() - t0;
        await lock.release();
        return granted;
      },
    },
    {
      id: 'lease-read',
      countsRoundTrips: true,
      label:
        'lease: read acquire + release, audit row (acquire: START; conditional UPDATE of the key row; INSERT log row; COMMIT. Release: one UPDATE)',
      kind: 'library',
      roundTrips: '1 + 1 (4 + 1 statements)',
      op: async () => {
        const lock = await locks.acquire('bench:u:lease-read', { mode: 'read' });
        await lock.release();
      },
    },
    {
      id: 'reentrant',
      countsRoundTrips: true,
      label: 'reentrant acquire + release (inside withLock)',
      kind: 'library',
      roundTrips: '0',
      op: async () => {
        const lock = await locks.acquire('bench:u:reentrant');
        await lock.release();
      },
      // Each op runs in a call chain that already holds the key: the outer lock is taken once per round.
      wrapRound: <T>(round: () => Promise<T>) => locks.withLock('bench:u:reentrant', () => round()),
    },
    {
      id: 'lease-decorated',
      countsRoundTrips: true,
      label:
        "lease: `@WriteLock` method running the same UPDATE ('requires-new': its transaction opens while the grant is on the wire; the fenced-commit routine ends the lock and commits in one CALL)",
      kind: 'library',
      roundTrips: '1 + 4 (2 overlap the grant)',
      op: () => work.lease('bench:u:dec-lease', oneUpdate, times()),
    },
    {
      id: 'row-lock-empty',
      countsRoundTrips: true,
      label: 'row-lock: `withLock` with an empty fn (START and the locking UPDATE in one CALL; the audit row and COMMIT in another)',
      kind: 'library',
      roundTrips: '2',
      op: design('row-lock', 'bench:u:row-lock'),
    },
    {
      id: 'row-lock-decorated',
      countsRoundTrips: true,
      label: "row-lock: `@WriteLock(…, { strategy: 'row-lock' })` method running the same UPDATE",
      kind: 'library',
      roundTrips: '3',
      op: () => work.rowLock('bench:u:dec-row', oneUpdate, times()),
    },
    ...rowLockFloorItems(deps),
  ];
}
