import type { EntityManager } from 'typeorm';
import { CallChain } from '../core/call-chain.js';
import type { HeldLock } from '../core/held-lock.js';
import type { LockInfo } from '../core/lock-handle.js';
import type { LockTarget } from '../core/lock-key.js';
import type { HolderMode } from '../core/lock-mode.js';
import { LockMetrics } from '../core/lock-metrics.js';
import { LockObserver } from '../core/lock-observer.js';
import { LockRuntime } from '../core/lock-runtime.js';
import type { LockBackendFactory } from '../lock-service.backend.js';
import type { ForcedReleaseHolder, LockList, LockListEntry } from '../store/admin.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import { LOCK_STRATEGY_NAMES, type LockStrategyName } from '../strategies/lock-strategy-name.js';
import { InMemoryKeeper } from './in-memory-keeper.js';
import { type Holding, InMemoryLockTable } from './in-memory-lock-table.js';
import { InMemoryStrategy } from './in-memory-strategy.js';
import { InMemoryTransactions } from './in-memory-transactions.js';

/**
 * A backend that keeps the locks of one LockService in memory: the same observer, runtime and
 * call chain as the database backend (so waiting, reentrancy, timeouts, events and signals behave
 * the same), with an in-memory table under the strategies and no transaction under fenced calls.
 */
export function inMemoryBackend(manager: EntityManager | undefined): LockBackendFactory {
  return async (service, logger) => {
    const { options } = service;
    const table = new InMemoryLockTable();
    const observer = new LockObserver(logger, options, await LockMetrics.load());
    let runtime: LockRuntime | undefined;
    const host = {
      release: (lock: HeldLock, failed: boolean) => runtime!.release(lock, failed),
      extend: (lock: HeldLock, leaseMs: number | undefined) => runtime!.extend(lock, leaseMs),
    };
    const strategies = new Map<LockStrategyName, LockStrategy>(
      // A row-lock's work runs in the lock's own transaction: in memory, the test's manager stands for it.
      LOCK_STRATEGY_NAMES.map((name) => [
        name,
        new InMemoryStrategy(name, host, table, options.writerPreference, name === 'row-lock' ? manager : null),
      ]),
    );
    const keeper = new InMemoryKeeper(options.maxHoldMs, (lock, error) => runtime?.lost(lock, error, true));
    runtime = new LockRuntime(strategies, observer, keeper, logger);
    const chain = new CallChain(runtime, options, observer, new InMemoryTransactions(manager), logger);
    return {
      observer,
      runtime,
      chain,
      managerMissing:
        'No EntityManager in this call chain: lockService.manager is available inside a locked call ' +
        "(transaction 'requires-new'), and DbLockTestingModule.forRoot({ manager }) must be given one to hand out.",
      inspect: (key, target) => Promise.resolve(inspect(table, key, target)),
      listLocks: (namespace, limit, after) => Promise.resolve(list(table, namespace, limit, Number(after))),
      forceRelease: (target, note) => Promise.resolve(forceRelease(table, target, note)),
      runJanitor: () =>
        Promise.resolve({
          ran: true,
          complete: true,
          reclaimed: 0,
          pruned: 0,
          reapedKeys: 0,
          batches: { reclaim: 0, prune: 0, reap: 0 },
          durationMs: 0,
        }),
      roundTrips: () => ({ locks: 0, renewals: 0, janitor: 0, admin: 0 }),
      start: () => undefined,
      stop: () => Promise.resolve(),
      close: () => Promise.resolve(keeper.stop()),
    };
  };
}

/** As the log row says: the lock's mode, or 'permit' for a semaphore's permit. */
function modeOf(holding: Holding, storedKey: string): HolderMode {
  const target = holding.targets.find((t) => t.storedKey === storedKey)!;
  return target.semaphoreLimit === undefined ? target.mode : 'permit';
}

function inspect(table: InMemoryLockTable, key: string, target: LockTarget): LockInfo {
  const holders = table.holdersOf(target.storedKey).map((h) => ({
    mode: modeOf(h, target.storedKey),
    owner: h.acquisitionId,
    holder: table.holder,
    strategy: h.strategy,
    fencingToken: h.tokens.get(target.storedKey)!,
    acquiredAt: h.acquiredAt,
    expiresAt: h.expiresAt,
  }));
  const latest = Math.max(...holders.map((h) => h.expiresAt.getTime()));
  return {
    key,
    mode: holders.length === 0 ? null : holders.some((h) => h.mode === 'write') ? 'write' : 'read',
    holders,
    expiresAt: holders.length === 0 ? null : new Date(latest),
    fencingToken: table.tokenOf(target.storedKey),
    serverTime: new Date(),
  };
}

function list(table: InMemoryLockTable, namespace: string, limit: number, after: number): LockList {
  const prefix = namespace ? `${namespace}:` : '';
  const now = new Date();
  const entries: (LockListEntry & { readonly row: number })[] = [];
  for (const h of table.live()) {
    for (const target of h.targets) {
      const row = h.rowNumbers.get(target.storedKey)!;
      if (!target.storedKey.startsWith(prefix) || row <= after) continue;
      entries.push({
        row,
        key: target.storedKey.slice(prefix.length),
        mode: modeOf(h, target.storedKey),
        owner: h.acquisitionId,
        holder: table.holder,
        strategy: h.strategy,
        fencingToken: h.tokens.get(target.storedKey)!,
        status: 'ACQUIRED',
        leaseMs: h.leaseMs,
        acquiredAt: h.acquiredAt,
        expiresAt: h.expiresAt,
        heldMs: now.getTime() - h.acquiredAt.getTime(),
        remainingMs: Math.max(0, h.expiresAt.getTime() - now.getTime()),
      });
    }
  }
  // `after` is a row number, as the database's row id: a page stays right when earlier locks end.
  entries.sort((a, b) => a.row - b.row);
  const page = entries.slice(0, limit);
  const next = entries.length > limit ? String(page[page.length - 1]!.row) : null;
  return { locks: page.map(({ row: _row, ...entry }) => entry), serverTime: now, next };
}

function forceRelease(table: InMemoryLockTable, target: LockTarget, note: string): ForcedReleaseHolder[] {
  return table.holdersOf(target.storedKey).map((h) => {
    table.end(h.acquisitionId, 'RELEASED', note);
    return { owner: h.acquisitionId, holder: table.holder, mode: modeOf(h, target.storedKey), fencingToken: h.tokens.get(target.storedKey)! };
  });
}
