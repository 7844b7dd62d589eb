/**
 * Connections a 'requires-new' locked call needs from the app's DataSource pool while its caller
 * may hold one (a request running in its own TypeORM transaction): the caller's and the new one.
 */
export const CONNECTIONS_PER_REQUIRES_NEW_CALL = 2;

/**
 * The bootstrap warning for a pool that cannot carry REQUIRES_NEW, or undefined when it can. A
 * caller that holds a connection and calls a 'requires-new' method waits for a second one; with
 * fewer than two it waits forever (spring-framework #26250), and mysql2 waits without a limit.
 */
export function businessPoolWarning(size: number, dataSourceName: string): string | undefined {
  if (size >= CONNECTIONS_PER_REQUIRES_NEW_CALL) return undefined;
  return (
    `DataSource '${dataSourceName}' has a pool of ${size} connection(s). A lock decorator with transaction 'requires-new' ` +
    `(the default) opens a second transaction on that pool while its caller may hold a connection: it needs at least ` +
    `${CONNECTIONS_PER_REQUIRES_NEW_CALL}, and one more per caller that holds a connection while calling locked methods concurrently. ` +
    `Raise TypeORM's poolSize (or extra.connectionLimit), or use transaction: 'none'.`
  );
}
