import { DbLockError } from './db-lock.error.js';

/** A lock was asked for before `DbLockModule` finished initialising (or after it shut down). */
export class DbLockNotInitializedError extends DbLockError {
  constructor(
    /** The DataSource name of the DbLockModule that was asked for. */
    readonly dataSourceName: string,
    detail = '',
  ) {
    super(
      `No LockService is ready for DataSource '${dataSourceName}'. Import DbLockModule.forRoot()/forRootAsync()` +
        ` for that DataSource and call the locked code after the application has initialised` +
        ` (app.init() or app.listen()), not from a constructor.${detail ? ' ' + detail : ''}`,
    );
  }
}
