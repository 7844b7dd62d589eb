import { describe } from '../core/option-checks.js';

/**
 * What this library reads of @nestjs-cls/transactional's `TransactionHost` through its public API.
 * A `TransactionHost<TransactionalAdapterTypeOrm>` is one; the library never imports the package,
 * so apps without it need nothing.
 */
export interface TransactionHostLike {
  /** The current transaction's EntityManager, or the adapter's fallback (the DataSource's manager). */
  readonly tx: unknown;
  /** True inside a transaction of this host. */
  isTransactionActive(): boolean;
  /** Runs `fn` outside any transaction of this host. */
  withoutTransaction<R>(fn: (...args: any[]) => Promise<R>): Promise<R>;
}

/**
 * `transactionHost` module option: 'auto' (default) finds the app's TransactionHosts at bootstrap,
 * `false` turns the integration off, or one TransactionHost to use.
 */
export type TransactionHostOption = 'auto' | false | TransactionHostLike;

/**
 * The two members of TransactionHost the binding relies on beyond its public API: the host's
 * ClsService (`cls`) and `setTxInstance`, which the host itself calls to make a transaction
 * current. Both exist, unchanged, in every @nestjs-cls/transactional 3.x release (and since the
 * package's first release); the public API can only open a NEW transaction, and the fence needs its
 * own, already open one to be the current one. Checked at bootstrap, so a release that changes them
 * is reported there, not at the first locked call.
 */
export interface BindableTransactionHost extends TransactionHostLike {
  readonly cls: { run<T>(options: { ifNested: 'inherit' }, fn: () => T): T };
  setTxInstance(tx: unknown): void;
}

export function isTransactionHostLike(value: unknown): value is TransactionHostLike {
  if (typeof value !== 'object' || value === null) return false;
  const host = value as Record<string, unknown>;
  try {
    return (
      typeof host.isTransactionActive === 'function' && typeof host.withoutTransaction === 'function' && typeof host.withTransaction === 'function'
    );
  } catch {
    return false; // a Proxy provider (nestjs-cls has some) may throw on any property read outside its context
  }
}

export function isBindable(host: TransactionHostLike): host is BindableTransactionHost {
  const inner = host as Partial<BindableTransactionHost>;
  return typeof inner.setTxInstance === 'function' && typeof inner.cls === 'object' && inner.cls !== null && typeof inner.cls.run === 'function';
}

/** Validation of the `transactionHost` option (shape only: which DataSource it serves is checked at bootstrap). */
export function checkTransactionHostOption(problems: string[], value: unknown): void {
  if (value === 'auto' || value === false || isTransactionHostLike(value)) return;
  problems.push(`transactionHost must be 'auto', false or a @nestjs-cls/transactional TransactionHost, got ${describe(value)}`);
}
