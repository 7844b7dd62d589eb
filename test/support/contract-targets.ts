import { describe } from 'node:test';
import type { DbLockModuleOptions, LockStrategyName } from '../../lib/index.js';
import { STRATEGIES, STRATEGY_CAPABILITIES, type StrategyCapability } from './strategies.js';
import { pgServerUrl, pgTestsRun } from './pg-test-database.js';
import { databaseTypeOf, serverUrl, type DatabaseType } from './test-database.js';

/**
 * The contract suite's entry point, as ShedLock's AbstractLockProviderIntegrationTest is run once
 * per provider: each test file declares the guarantee it proves, and runs once per target (a
 * strategy on a store) that the guarantee applies to. A store added later (PostgreSQL, or an
 * in-memory LockService for users' own tests) is one more target with its own capabilities; the
 * tests do not change, and the registry below says which of them it can run.
 */

/** What a store offers the tests: a future in-memory store would offer none of these. */
export type StoreCapability =
  /** Locks are shared between OS processes (worker processes, SIGKILL, SIGSTOP). */
  | 'processes'
  /** The tests may reach the server under the store: hold row locks, KILL statements, set session flags. */
  | 'mysql-server'
  /** The tests may reach the server's sessions: hold row locks, list sessions, cancel a statement or end a session (KILL QUERY/CONNECTION, pg_cancel_backend/pg_terminate_backend). */
  | 'server-sessions'

  /** The store's tables can be read through the documented helpers (audit rows, stored keys). */
  | 'sql-tables';

export type Capability = StrategyCapability | StoreCapability;

export interface ContractTarget {
  /** For test names: `lease @ 127.0.0.1:3306`. */
  readonly name: string;
  readonly strategy: LockStrategyName;
  /** host:port of the database server (no credentials). */
  readonly server: string;
  /** The server's URL (credentials included), for TestDatabase.forTarget (absent: DB_LOCK_TEST_URL's). */
  readonly serverUrl?: URL;
  /** The server's kind (absent: MySQL). */
  readonly database?: DatabaseType;
  readonly capabilities: ReadonlySet<Capability>;
  /** Module options for this target: `extra` with its strategy. */
  options<T extends DbLockModuleOptions>(extra?: T): T & { strategy: LockStrategyName };
}

/** Every guarantee of the contract and what a target needs for it to apply (all of them). */
export const GUARANTEES = {
  /** One writer or any number of readers per key, across processes. */
  exclusion: ['processes'],
  /** Writers never overlap readers or each other; readers share; across processes. */
  'read-write': ['processes'],
  /** Several keys are taken all or nothing, in one order, never deadlocking. */
  'multi-key': ['processes'],
  /** A holder stopped past its lease and taken over cannot commit (lease holders, a lease taker). */
  'fenced-commit': ['processes', 'sql-tables', 'lease-expiry'],
  /** The lock or a typed timeout within the budget; "timeout" never means held. */
  'bounded-wait': ['sql-tables'],
  /** The app's own work holding the DataSource pool full cannot hold a locked call past its budget, nor its granted lock. */
  'bounded-connection-wait': ['sql-tables'],
  /** A grant blocked on a server row lock is cut at its deadline and leaves nothing live. */
  'bounded-wait-blocked-grant': ['mysql-server', 'sql-tables'],
  /** maxAttempts bounds the tries within timeoutMs. */
  'bounded-attempts': [],
  /** Acquire, exclude, release, share, hand off; reentrancy in one call chain. */
  basics: ['sql-tables'],
  /** Decorated and withLock calls run in a fenced transaction (REQUIRES_NEW, cls, escaped writes flagged). */
  'fenced-decorators': ['sql-tables'],
  /** transaction 'none' gives the lock only: lockService.manager throws inside it. */
  'transaction-none': ['sql-tables'],
  /** Every lease comparison uses the server clock; a skewed client changes nothing. */
  'server-clock': ['processes', 'sql-tables'],
  /** onLocked 'skip': of several nodes firing one job, exactly one runs. */
  'cluster-singleton': ['processes', 'sql-tables'],
  /** A grant statement killed or cut mid-way is retried or given back, never a raw driver error. */
  'interrupted-grants': ['server-sessions', 'sql-tables'],
  /** Reentrancy costs no round trip; read -> write is refused. */
  reentrancy: ['sql-tables'],
  /** Keys compare exactly: no PAD SPACE, case folding or normalisation. */
  'exact-keys': ['sql-tables'],
  /** listLocks pages through live holders; forceRelease evicts a holder of this process; bad arguments typed. */
  admin: ['processes', 'sql-tables'],
  /** forceRelease evicts a holder in another process: its signal aborts, the key is free at once. */
  'admin-evict-remote': ['processes', 'sql-tables'],
  /** Bad input: typed error, nothing sent, nothing written. */
  'bad-input': ['sql-tables'],
  /** A single try is sent even where its connection must first be opened: a slow open is never taken for a busy key. */
  'one-try-cold-pool': ['sql-tables'],
  /** A crashed holder's lock comes back (within its lease, or at once with its connection). */
  'crash-liveness': ['processes', 'sql-tables'],
  /** An expired holder is taken over and fenced (lease strategy only). */
  'lease-takeover': ['lease-expiry', 'sql-tables'],
  /** A stale release/extend never touches the new holder (a stale holder exists only where leases expire). */
  'stale-holder': ['lease-expiry', 'sql-tables'],
  /** A SIGKILLed lease holder's key is free within its lease plus one poll, never earlier. */
  'crash-liveness-lease': ['lease-expiry', 'processes', 'sql-tables'],
  /** Renewals: per process, never renew an ended row, race grants correctly; a blocked renewal aborts the signal first. */
  'lease-renewal': ['lease-expiry', 'connection-free-holders', 'processes', 'sql-tables'],
  /** The janitor: one at a time in the cluster; reclaims, prunes, reaps. */
  'lease-janitor': ['lease-expiry', 'processes', 'sql-tables'],
  /** Fair handoff: a releasing process does not take the key back ahead of a remote waiter. */
  'lease-handoff': ['lease-expiry', 'connection-free-holders', 'sql-tables'],
  /** Writer preference between processes and crashed readers or waiting writers (lease's own mark). */
  'lease-writer-preference': ['lease-expiry', 'processes', 'sql-tables'],
  /** poolSize bounds every connection the library opens (its pool, renewal lane, doorbells), counted on the server. */
  'connection-budget': ['connection-free-holders', 'server-sessions'],
  /** The lock's end travels in the fenced business commit (one round trip per decorated call). */
  'lease-mechanics': ['lease-expiry', 'connection-free-holders', 'sql-tables'],
  /** Slow warnings, the event hook and stats, including renewal and loss events (lease's). */
  observability: ['lease-expiry', 'sql-tables'],
  /** CLIENT_FOUND_ROWS on and off: identical outcomes of a grant/busy/release/takeover round. */
  'found-rows': ['lease-expiry', 'mysql-server', 'sql-tables'],
  /** The lock is the holder's transaction on its own connection (row-lock strategy). */
  'holder-connection': ['holder-connection', 'sql-tables'],
  /** A stalled row-lock holder keeps its key and commits (no lease); waiters queue or time out behind it. */
  'row-lock-stall': ['holder-connection', 'processes', 'sql-tables'],
  /** A row-lock hold is its locking UPDATE, the work and one INSERT in the commit: statements counted per hold. */
  'row-lock-statements': ['holder-connection', 'sql-tables'],
  /** Lease and row-lock callers on one key exclude each other and share one token sequence (run once, on row-lock's target). */
  'mixed-strategies': ['holder-connection', 'processes', 'sql-tables'],
  /** A single-key lease grant reads live holders after it has the key row lock, never from a view taken before its wait. */
  'lease-grant-after-row-lock': ['lease-expiry', 'sql-tables'],
  /** Semaphores: at most `limit` lease holders per key across processes, each fenced, crash-safe. */
  semaphore: ['lease-expiry', 'processes', 'sql-tables'],
  /** Semaphore calls in one process: decorator, withSemaphore, reentrancy, limit mismatch and bad input typed. */
  'semaphore-calls': ['lease-expiry', 'sql-tables'],
  /** OpenTelemetry instruments agree with what happened (grants, timeouts, losses, takeovers); nothing fails without an SDK. */
  metrics: ['lease-expiry', 'sql-tables'],
  /** The in-process guarantees the testing module's in-memory LockService keeps, here on a store (store-free). */
  'in-process': [],
} as const satisfies Record<string, readonly Capability[]>;

export type Guarantee = keyof typeof GUARANTEES;

/**
 * Guarantees the README states for a strategy that it does not keep today. Their tests are
 * registered as skipped with the reason (visible as `# SKIP` in every run), not left out, and the
 * entry goes once the strategy keeps them.
 */
export const KNOWN_GAPS: Partial<Record<Guarantee, Partial<Record<LockStrategyName, string>>>> = {
  'bounded-attempts': {
    'row-lock': 'known gap: maxAttempts is not honoured, a row-lock waiter waits in the server in one locking statement for the whole timeoutMs',
  },
  admin: {
    'row-lock': 'known gap: a row-lock holder writes its audit row in its commit, so listLocks, inspect and forceRelease do not see a held row-lock',
  },
  'admin-evict-remote': {
    'row-lock': "known gap: forceRelease does not see, nor end, another process's open row-lock transaction (it has no live row)",
  },
};

/**
 * As KNOWN_GAPS, for a strategy on PostgreSQL only: what the PostgreSQL store does not keep today
 * that the MySQL store does (found by the contract suite on PostgreSQL). The entry goes once it does.
 */
export const KNOWN_POSTGRES_GAPS: Partial<Record<Guarantee, Partial<Record<LockStrategyName, string>>>> = {};

/** The reason a guarantee's tests are skipped on a target (see KNOWN_GAPS, KNOWN_POSTGRES_GAPS), or undefined. */
export function gapOf(guarantee: Guarantee, target: ContractTarget): string | undefined {
  return KNOWN_GAPS[guarantee]?.[target.strategy] ?? (target.database === 'postgres' ? KNOWN_POSTGRES_GAPS[guarantee]?.[target.strategy] : undefined);
}

const STORE_CAPABILITIES: Readonly<Record<string, readonly StoreCapability[]>> = {
  'mysql:': ['processes', 'mysql-server', 'server-sessions', 'sql-tables'],
  'postgres:': ['processes', 'server-sessions', 'sql-tables'],
};

/** Whether this run has PostgreSQL targets (see pgTestsRun), asked once when the module loads. */
const PG_TARGETS = await pgTestsRun();

/**
 * The targets of this run: each strategy (DB_LOCK_TEST_STRATEGIES narrows) on the server of
 * DB_LOCK_TEST_URL, then on the PostgreSQL server of DB_LOCK_TEST_PG_URL when pgTestsRun() says so.
 */
export function contractTargets(): ContractTarget[] {
  const servers = PG_TARGETS ? [serverUrl(), pgServerUrl()] : [serverUrl()];
  return servers.flatMap((url) => {
    const store = STORE_CAPABILITIES[databaseTypeOf(url) === 'postgres' ? 'postgres:' : url.protocol];
    if (!store) throw new Error(`no contract target for ${url.protocol} servers`);
    return STRATEGIES.map((strategy) => ({
      name: `${strategy} @ ${url.host}`,
      strategy,
      server: url.host,
      serverUrl: url,
      database: databaseTypeOf(url),
      capabilities: new Set<Capability>([...STRATEGY_CAPABILITIES[strategy], ...store]),
      options: <T extends DbLockModuleOptions>(extra?: T) => ({ ...(extra ?? ({} as T)), strategy }),
    }));
  });
}

export function appliesTo(guarantee: Guarantee, target: ContractTarget): boolean {
  return GUARANTEES[guarantee].every((capability) => target.capabilities.has(capability));
}

export interface ContractSuiteOptions {
  /**
   * The file runs on PostgreSQL targets too: its databases come from TestDatabase.forTarget, and
   * its own SQL (tables, statements of its scenarios) is written for both servers (portable-sql.ts).
   */
  readonly postgres?: boolean;
}

/**
 * Why a file that has not said `postgres: true` is skipped on a PostgreSQL target: its SQL and its
 * databases are MySQL's (TestDatabase.create() without a target makes a MySQL database).
 */
export const NOT_ON_POSTGRES = "not yet on PostgreSQL: this file's SQL and test databases are MySQL's";

type Suite = (target: ContractTarget) => void;

/**
 * Registers `suite` once per target the guarantee applies to, inside a describe named after the
 * guarantee and the target. A file declares what it proves by the guarantee it passes here, and
 * whether it runs on PostgreSQL (`{ postgres: true }`); otherwise its PostgreSQL copies are
 * registered skipped with NOT_ON_POSTGRES, visible as `# SKIP` in every run.
 */
export function contractSuite(guarantee: Guarantee, title: string, suite: Suite): void;
export function contractSuite(guarantee: Guarantee, title: string, options: ContractSuiteOptions, suite: Suite): void;
export function contractSuite(guarantee: Guarantee, title: string, optionsOrSuite: ContractSuiteOptions | Suite, maybeSuite?: Suite): void {
  const [options, suite] = typeof optionsOrSuite === 'function' ? [{}, optionsOrSuite] : [optionsOrSuite, maybeSuite!];
  for (const target of contractTargets()) {
    if (!appliesTo(guarantee, target)) continue;
    const skip = gapOf(guarantee, target) ?? (target.database === 'postgres' && !options.postgres ? NOT_ON_POSTGRES : undefined);
    describe(`${title} [${guarantee}; ${target.name}]`, { skip }, () => suite(target));
  }
}
