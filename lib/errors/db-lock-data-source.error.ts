import { DbLockError } from './db-lock.error.js';

const list = (names: readonly string[]): string => (names.length === 0 ? 'none' : names.map((n) => `'${n}'`).join(', '));

/**
 * A DbLockModule is registered for a DataSource name that no TypeORM DataSource of the app has.
 * Raised at bootstrap, before any SQL: the lock tables would otherwise be looked for in the wrong
 * database, or Nest would fail with a dependency error naming an internal token.
 */
export class DbLockDataSourceNotFoundError extends DbLockError {
  constructor(
    /** The name the DbLockModule was registered for. */
    readonly dataSourceName: string,
    /** Names of the TypeORM DataSources the app does have. */
    readonly availableNames: readonly string[],
  ) {
    super(
      `DbLockModule is registered for DataSource '${dataSourceName}', but the app has no TypeORM DataSource named ` +
        `'${dataSourceName}' (DataSources found: ${list(availableNames)}). Give DbLockModule.forRoot()/forRootAsync() ` +
        `the dataSourceName of an existing DataSource, or register TypeOrmModule.forRoot({ name: '${dataSourceName}', ... }).`,
    );
  }
}

/**
 * A lock decorator names no `dataSourceName` while DbLockModule is registered for several
 * DataSources: which one should serve the lock is not something to guess.
 */
export class DbLockAmbiguousDataSourceError extends DbLockError {
  constructor(
    /** Names of the DataSources whose DbLockModule is running. */
    readonly registeredNames: readonly string[],
    detail = '',
  ) {
    super(
      `This lock names no dataSourceName, and DbLockModule runs for several DataSources (${list(registeredNames)}). ` +
        `Name one in the decorator ({ dataSourceName: '...' }) or inject the LockService of that DataSource ` +
        `(@InjectLockService('name')).${detail ? ' ' + detail : ''}`,
    );
  }
}
