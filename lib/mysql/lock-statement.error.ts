import { classify, describeDriverError, type FailureKind } from './errno.js';

/**
 * A lock statement that failed, with what its failure means (see errno.ts). Internal on
 * purpose: it never reaches a caller. The strategies turn it into a public DbLockError subclass
 * (timeout, lost, connection) with the driver error as `cause`.
 */
export class LockStatementError extends Error {
  override readonly name = 'LockStatementError';
  constructor(
    readonly kind: FailureKind | 'deadline',
    readonly driverError: unknown,
    message?: string,
  ) {
    super(message ?? `Lock statement failed: ${describeDriverError(driverError)}`, { cause: driverError });
  }

  /** The statement's effect is unknown: anything it may have granted must be given back. */
  get outcomeUnknown(): boolean {
    return this.kind === 'connection-lost' || this.kind === 'deadline';
  }

  static from(error: unknown): LockStatementError {
    return error instanceof LockStatementError ? error : new LockStatementError(classify(error), error);
  }
}
