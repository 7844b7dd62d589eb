import { Entity, PrimaryColumn } from 'typeorm';
import { ROW_LOCK_TABLE } from '../store/tables.js';

/**
 * One row per key locked with the row-lock strategy. A holder keeps InnoDB's row lock on it
 * (FOR UPDATE / shared) for as long as its transaction is open: the server queues the waiters,
 * hands the lock over at COMMIT and frees it the moment the holder's connection closes.
 */
@Entity({ name: ROW_LOCK_TABLE, synchronize: false })
export class RowLockEntity {
  /** The stored key (namespace included), as bytes. */
  @PrimaryColumn({ name: 'lock_key', type: 'varchar', length: 764, charset: 'binary' })
  key!: Buffer;
}
