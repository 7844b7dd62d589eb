import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { toTypedError } from '../../lib/errors/to-typed-error.js';
import { DbLockConnectionError, DbLockError } from '../../lib/index.js';
import { classify } from '../../lib/store/mysql/errno.js';

const serverError = (errno: number, code: string) => Object.assign(new Error(code), { errno, code, sqlState: 'HY000' });
const networkError = (code: string, fatal = true) => Object.assign(new Error(code), { code, fatal });

/**
 * What every error a lock statement can meet means, decided in one place. A lock statement either
 * tries again within the caller's budget (nothing took effect), gives back what it may have granted
 * (outcome unknown), or ends in a typed DbLockError with the driver error as `cause`.
 */
describe('errno policy', () => {
  const table: [string, unknown, string][] = [
    ['1205 lock wait timeout: only the statement rolled back', serverError(1205, 'ER_LOCK_WAIT_TIMEOUT'), 'retry'],
    ['1213 deadlock / Galera certification: the transaction rolled back', serverError(1213, 'ER_LOCK_DEADLOCK'), 'retry'],
    ['1020 record changed since last read (snapshot isolation)', serverError(1020, 'ER_CHECKREAD'), 'retry'],
    ['1467 AUTO-INC lock wait', serverError(1467, 'ER_AUTOINC_READ_FAILED'), 'retry'],
    ['1317 KILL QUERY', serverError(1317, 'ER_QUERY_INTERRUPTED'), 'interrupted'],
    ['1969 MariaDB max_statement_time', serverError(1969, 'ER_STATEMENT_TIMEOUT'), 'interrupted'],
    ['3024 MySQL MAX_EXECUTION_TIME', serverError(3024, 'ER_QUERY_TIMEOUT'), 'interrupted'],
    ['2013 lost connection during query', serverError(2013, 'CR_SERVER_LOST'), 'connection-lost'],
    ['PROTOCOL_CONNECTION_LOST', networkError('PROTOCOL_CONNECTION_LOST'), 'connection-lost'],
    ['ECONNRESET', networkError('ECONNRESET'), 'connection-lost'],
    ['ECONNREFUSED', networkError('ECONNREFUSED'), 'unreachable'],
    ['ETIMEDOUT (connect)', networkError('ETIMEDOUT'), 'unreachable'],
    ['1040 too many connections', serverError(1040, 'ER_CON_COUNT_ERROR'), 'unreachable'],
    ['1226 user resource limit', serverError(1226, 'ER_USER_LIMIT_REACHED'), 'unreachable'],
    ['1047 Galera node not ready', serverError(1047, 'ER_UNKNOWN_COM_ERROR'), 'unreachable'],
    ['1045 access denied', serverError(1045, 'ER_ACCESS_DENIED_ERROR'), 'denied'],
    ['1290 read-only server', serverError(1290, 'ER_OPTION_PREVENTS_STATEMENT'), 'read-only'],
    ['1146 table missing', serverError(1146, 'ER_NO_SUCH_TABLE'), 'schema'],
    ['a bug', new TypeError('x is not a function'), 'other'],
  ];
  for (const [what, error, kind] of table) {
    it(`${what} -> ${kind}`, () => assert.equal(classify(error), kind));
  }

  it('whatever it was, the caller gets a DbLockError subclass with the driver error as cause', () => {
    for (const [, error, kind] of table) {
      if (kind === 'retry') continue; // retried inside the budget; a timeout reports it as cause
      const typed = toTypedError(error, 'context');
      assert.ok(typed instanceof DbLockError, `${String(error)} -> ${typed.name}`);
      if (kind !== 'schema') assert.ok(typed instanceof DbLockConnectionError);
      assert.equal(typed.cause, error);
    }
  });
});
