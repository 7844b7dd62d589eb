/**
 * Uncontended section: one caller, one key, sequential operations. Floors (SELECT 1, autocommit
 * PK UPDATE, GET_LOCK + RELEASE_LOCK), peers, and this library (write, read, reentrant, fenced
 * transaction by hand vs plain transaction). Round value = median latency of the round's ops.
 */
import type mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import type { BenchConfig } from './config.js';
import type { LockDesign } from './designs.js';
import { type Figure, figure, hostNow, median } from './stats.js';

export type ItemKind = 'floor' | 'peer' | 'library';

export interface UncontendedItem {
  readonly id: string;
  readonly label: string;
  readonly kind: ItemKind;
  /** Round trips to the database (or Redis) per op, as designed; measured for the library. */
  readonly roundTrips: string;
  /** Counts library round trips (stats().roundTrips) per op. */
  readonly countsRoundTrips?: boolean;
  /** One operation; may return the duration of its first phase (acquire), in ms. */
  op(): Promise<number | void>;
  /** Runs a whole round inside some context (the reentrant item runs inside withLock). */
  wrapRound?<T>(round: () => Promise<T>): Promise<T>;
}

export interface UncontendedFigure {
  readonly item: UncontendedItem;
  /** Latency per op, ms. */
  readonly latency: Figure;
  /** Library items: round trips counted by stats().roundTrips per op. */
  readonly measuredRoundTrips?: number;
  /** Items whose op reports its first phase: that phase's latency, ms. */
  readonly firstPhase?: Figure;
}

export interface UncontendedDeps {
  floor: mysql.Connection;
  locks: LockService;
  dataSource: DataSource;
  forUpdate: LockDesign;
  naive: LockDesign;
  redlock: LockDesign;
}

export function uncontendedItems(deps: UncontendedDeps): UncontendedItem[] {
  const { floor, locks, dataSource } = deps;
  const pkUpdate = (): Promise<unknown> => floor.query('UPDATE bench_counter SET v = v + 1 WHERE id = 2');
  const design = (d: LockDesign, key: string) => async () => {
    const release = await d.acquire(key, 0);
    await release();
  };
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
      id: 'one-trip-grant',
      label: 'minimal one-round-trip grant shape: START TRANSACTION; INSERT audit row; UPDATE counter; COMMIT',
      kind: 'floor',
      roundTrips: '1',
      op: async () =>
        void (await floor.query(
          "START TRANSACTION; INSERT INTO bench_audit (k, owner) VALUES ('bench:uncontended', UUID()); UPDATE bench_counter SET v = v + 1 WHERE id = 2; COMMIT",
        )),
    },
    {
      id: 'get-lock',
      label: '`GET_LOCK` + `RELEASE_LOCK`',
      kind: 'floor',
      roundTrips: '2',
      op: async () => {
        await floor.query("SELECT GET_LOCK('bench:uncontended', 10)");
        await floor.query("SELECT RELEASE_LOCK('bench:uncontended')");
      },
    },
    { id: 'for-update', label: '`SELECT … FOR UPDATE` lock (BEGIN, SELECT, COMMIT)', kind: 'peer', roundTrips: '3', op: design(deps.forUpdate, 'bench:uncontended') },
    { id: 'naive-table', label: 'naive table lock (INSERT + DELETE)', kind: 'peer', roundTrips: '2', op: design(deps.naive, 'bench:uncontended') },
    { id: 'redlock', label: 'node-redlock lock + unlock (Redis)', kind: 'peer', roundTrips: '2 (Redis)', op: design(deps.redlock, 'bench:uncontended') },
    {
      id: 'lease-write',
      countsRoundTrips: true,
      label: 'exclusive acquire + release, audit row',
      kind: 'library',
      roundTrips: '2',
      op: async () => {
        const t0 = hostNow();
        const lock = await locks.acquire('bench:uncontended');
        const acquired = hostNow() - t0;
        await lock.release();
        return acquired;
      },
    },
    {
      id: 'lease-read',
      countsRoundTrips: true,
      label: 'read acquire + release, audit row',
      kind: 'library',
      roundTrips: '2',
      op: async () => {
        const lock = await locks.acquire('bench:uncontended', { mode: 'read' });
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
        const lock = await locks.acquire('bench:reentrant');
        await lock.release();
      },
      // Each op runs in a call chain that already holds the key: the outer lock is taken once per round.
      wrapRound: <T>(round: () => Promise<T>) => locks.withLock('bench:reentrant', () => round()),
    },
    {
      id: 'plain-tx',
      label: 'plain transaction (one UPDATE), no lock',
      kind: 'library',
      roundTrips: '3 (TypeORM)',
      op: async () => {
        await dataSource.transaction(async (manager) => {
          await manager.query('UPDATE bench_counter SET v = v + 1 WHERE id = 3');
        });
      },
    },
    {
      id: 'locked-tx',
      countsRoundTrips: true,
      label: 'acquire + plain transaction + release (no fence)',
      kind: 'library',
      roundTrips: '2 + 3',
      op: async () => {
        const lock = await locks.acquire('bench:fenced');
        await dataSource.transaction(async (manager) => {
          await manager.query('UPDATE bench_counter SET v = v + 1 WHERE id = 3');
        });
        await lock.release();
      },
    },
    {
      id: 'fenced-tx',
      countsRoundTrips: true,
      label: 'decorator path: runLocked, fenced REQUIRES_NEW transaction with the same UPDATE',
      kind: 'library',
      roundTrips: '2 + 4',
      // Exactly what @WriteLock('bench:fenced') forwards to: grant, new transaction, the write,
      // the fence in the same transaction, COMMIT, release.
      op: async () => {
        await locks.runLocked('bench:fenced', async () => {
          await locks.manager.query('UPDATE bench_counter SET v = v + 1 WHERE id = 3');
        });
      },
    },
  ];
}

/** Runs every item's rounds, interleaved (round 1 of all items, then round 2 ...). */
export async function runUncontended(
  items: readonly UncontendedItem[],
  locks: LockService,
  config: BenchConfig,
  log: (line: string) => void,
): Promise<Map<string, UncontendedFigure>> {
  const latencies = new Map<string, number[]>(items.map((i) => [i.id, []]));
  const roundTrips = new Map<string, number[]>(items.map((i) => [i.id, []]));
  const phases = new Map<string, number[]>(items.map((i) => [i.id, []]));
  type RoundOut = { median: number; roundTrips: number; phase: number };
  const runRound = async (item: UncontendedItem, ops: number): Promise<RoundOut> => {
    const round = async (): Promise<RoundOut> => {
      const samples: number[] = [];
      const phaseSamples: number[] = [];
      const before = locks.stats().roundTrips;
      for (let i = 0; i < ops; i++) {
        const t0 = hostNow();
        const phase = await item.op();
        samples.push(hostNow() - t0);
        if (typeof phase === 'number') phaseSamples.push(phase);
      }
      return { median: median(samples), roundTrips: (locks.stats().roundTrips - before) / ops, phase: median(phaseSamples) };
    };
    return item.wrapRound ? item.wrapRound(round) : round();
  };
  for (const item of items) await runRound(item, Math.min(30, config.opsPerRound)); // warm-up
  for (let r = 0; r < config.rounds; r++) {
    for (const item of items) {
      const result = await runRound(item, config.opsPerRound);
      latencies.get(item.id)!.push(result.median);
      roundTrips.get(item.id)!.push(result.roundTrips);
      phases.get(item.id)!.push(result.phase);
    }
    log(`  uncontended round ${r + 1}/${config.rounds} done`);
  }
  const figures = new Map<string, UncontendedFigure>();
  for (const item of items) {
    figures.set(item.id, {
      item,
      latency: figure(latencies.get(item.id)!),
      measuredRoundTrips: item.countsRoundTrips ? median(roundTrips.get(item.id)!) : undefined,
      firstPhase: phases.get(item.id)!.some(Number.isFinite) ? figure(phases.get(item.id)!) : undefined,
    });
  }
  return figures;
}
