/**
 * What a failed store statement means; callers act on the kind, never on a driver's codes (each
 * store maps its own, see its `failureKindOf`):
 * - `retry`: the server rolled the statement or its transaction back; nothing took effect.
 * - `interrupted`: the server stopped the statement (a statement time limit, KILL QUERY).
 * - `connection-lost`: the connection broke mid-statement; the outcome is unknown (a COMMIT may
 *   have landed), so whatever it may have granted must be given back.
 * - `unreachable`: nothing reached the server; trying again later may work.
 * - `denied` / `read-only` / `schema`: retrying cannot help.
 * - `other`: a bug or an unexpected answer.
 */
export type FailureKind = 'retry' | 'interrupted' | 'connection-lost' | 'unreachable' | 'denied' | 'read-only' | 'schema' | 'other';

/** A store's reading of a driver error; undefined when the error is not its driver's. */
export type FailureClassifier = (error: unknown) => FailureKind | undefined;

const classifiers: FailureClassifier[] = [];

/** Called once by each store when it loads. */
export function registerFailureClassifier(classifier: FailureClassifier): void {
  if (!classifiers.includes(classifier)) classifiers.push(classifier);
}

export function failureKindOf(error: unknown): FailureKind {
  for (const classifier of classifiers) {
    const kind = classifier(error);
    if (kind !== undefined) return kind;
  }
  return 'other';
}

/** A failed lock statement with its kind. Internal: callers get a typed DbLockError with the driver error as `cause`. */
export class LockStatementError extends Error {
  override readonly name = 'LockStatementError';
  constructor(
    readonly kind: FailureKind | 'deadline',
    readonly driverError: unknown,
    message?: string,
  ) {
    super(message ?? `Lock statement failed: ${describeDriverError(driverError)}`, { cause: driverError });
  }

  /** Nothing was sent (no connection came in time): the statement surely had no effect. */
  sent = true;

  /** The statement's effect is unknown: anything it may have granted must be given back. */
  get outcomeUnknown(): boolean {
    return this.sent && (this.kind === 'connection-lost' || this.kind === 'deadline');
  }

  /** A try that failed this way holds nothing (an unknown outcome is given back): its caller's queue tries again within the budget. */
  get triedAgain(): boolean {
    return (
      this.kind === 'retry' ||
      this.kind === 'deadline' ||
      this.kind === 'interrupted' ||
      this.kind === 'connection-lost' ||
      this.kind === 'unreachable'
    );
  }

  /** The client stopped waiting for an answer at its deadline; the server may still run the statement. */
  static deadline(message: string): LockStatementError {
    return new LockStatementError('deadline', new Error(message), message);
  }

  /** The client stopped waiting for a connection at its deadline: the statement was never sent. */
  static notSent(message: string): LockStatementError {
    const error = new LockStatementError('deadline', new Error(message), message);
    error.sent = false;
    return error;
  }

  static from(error: unknown): LockStatementError {
    return error instanceof LockStatementError ? error : new LockStatementError(failureKindOf(error), error);
  }
}

/** Short text naming a driver error: "errno 1205 (ER_LOCK_WAIT_TIMEOUT)", "ECONNRESET", or its message. */
export function describeDriverError(error: unknown): string {
  const { errno, code } = (error ?? {}) as { errno?: unknown; code?: unknown };
  if (typeof errno === 'number') return `errno ${errno}${typeof code === 'string' ? ` (${code})` : ''}`;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.message : String(error);
}
