import { DbLockError } from './db-lock.error.js';

/**
 * Why a write outside a fenced transaction was stopped:
 * - 'escaped': `escapedWrites: 'error'` refuses any write on another connection of the fenced
 *   DataSource while the call chain's fenced transaction is open (nothing was sent);
 * - 'lock-wait': the write waited for a row lock while the fenced transaction, which had already
 *   written, was open: almost certainly for that transaction's own locks, which only its end
 *   releases (a self-deadlock). It was bounded instead of hanging for innodb_lock_wait_timeout.
 */
export type EscapedWriteReason = 'escaped' | 'lock-wait';

/**
 * A write issued inside a fenced call (a lock decorator with transaction 'requires-new', or a
 * row-lock call) that did not go through the fenced transaction: it would commit even if the fence
 * rolls back, and it waits for the fenced transaction's own row locks if it touches the same rows.
 * The fix is in the message: write through `lockService.manager` (or `TransactionHost.tx` with
 * @nestjs-cls/transactional), so the write is part of the fenced transaction.
 */
export class EscapedWriteError extends DbLockError {
  constructor(
    /** 'refused' (escapedWrites: 'error') or 'lock-wait' (it waited for the fenced transaction's own row locks). */
    readonly reason: EscapedWriteReason,
    /** The DataSource whose fenced transaction was escaped. */
    readonly dataSourceName: string,
    /** The statement, shortened. */
    readonly statement: string,
    /** The first stack frame outside the library and node_modules, if one was found. */
    readonly callSite: string | undefined,
    /** How to fix it, one sentence. */
    readonly fix: string,
    options?: { cause?: unknown },
  ) {
    const where = callSite ? ` at ${callSite}` : '';
    super(
      reason === 'escaped'
        ? `Write outside the fenced transaction${where}: "${statement}" would run on another connection of DataSource ` +
            `'${dataSourceName}' while this call's fenced transaction is open, so it would commit even if the fence ` +
            `rolls back. It was not sent (escapedWrites: 'error'). ${fix}`
        : `Write outside the fenced transaction${where} waited for a row lock: "${statement}" ran on another connection ` +
            `of DataSource '${dataSourceName}' while this call's fenced transaction, which had already written rows, was ` +
            `open. Those row locks are released only when the fenced call ends, so it was almost certainly waiting for ` +
            `them: a self-deadlock that would have hung for innodb_lock_wait_timeout (50 s by default). The wait was ` +
            `cut after 1 s and the fenced call fails. ${fix}`,
      options,
    );
  }
}
