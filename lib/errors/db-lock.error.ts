/**
 * Base class of every error this library throws. `name` is the subclass's name so logs and
 * `instanceof`-free checks (`err.name === 'LockTimeoutError'`) both work, and `cause` is kept.
 * Not an HttpException: locks run in crons and queue consumers too (see the sample app's
 * exception filter for an HTTP mapping).
 */
export class DbLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
