import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { LOCK_LOG_TABLE } from '../storage/lock-tables.js';

/**
 * One row per acquisition of one key (seed 004's t_lock_log): the audit trail, the holder's
 * lease (renewed by the watchdog) and the row the fenced commit and a takeover both write.
 */
@Entity({ name: LOCK_LOG_TABLE })
@Index('idx_db_lock_log_key_status', ['key', 'status', 'expiresAt'])
@Index('idx_db_lock_log_status_expires', ['status', 'expiresAt'])
@Index('idx_db_lock_log_owner_status', ['owner', 'status'])
@Index('idx_db_lock_log_ended', ['endedAt'])
export class LockLogEntity {
  @PrimaryGeneratedColumn({ type: 'bigint', unsigned: true })
  id!: string;

  @Column({ name: 'lock_key', type: 'varbinary', length: 764 })
  key!: Buffer;

  @Column({ type: 'varchar', length: 5, charset: 'ascii', collation: 'ascii_bin' })
  mode!: 'read' | 'write';

  /** Token of one acquisition (shared by the rows of a multi-key lock). */
  @Column({ type: 'char', length: 36, charset: 'ascii', collation: 'ascii_bin' })
  owner!: string;

  /** Which process holds it: host:pid, for people reading the table. */
  @Column({ type: 'varchar', length: 255 })
  holder!: string;

  @Column({ name: 'fencing_token', type: 'bigint', unsigned: true })
  fencingToken!: string;

  /** ACQUIRED, COMPLETED (live); RELEASED, FAILED, EXPIRED (terminal). */
  @Column({ type: 'varchar', length: 10, charset: 'ascii', collation: 'ascii_bin' })
  status!: string;

  @Column({ name: 'lease_ms', type: 'int', unsigned: true })
  leaseMs!: number;

  @Column({ name: 'acquired_at', type: 'datetime', precision: 6 })
  acquiredAt!: Date;

  /** End of the lease, server UTC; renewals push it forward. */
  @Column({ name: 'expires_at', type: 'datetime', precision: 6 })
  expiresAt!: Date;

  @Column({ name: 'ended_at', type: 'datetime', precision: 6, nullable: true })
  endedAt!: Date | null;

  @Column({ name: 'wait_ms', type: 'int', unsigned: true, default: 0 })
  waitMs!: number;

  @Column({ name: 'hold_ms', type: 'int', unsigned: true, nullable: true })
  holdMs!: number | null;

  /** Why it ended, when not by its holder: who took it over, a force-release reason. */
  @Column({ type: 'varchar', length: 255, nullable: true })
  note!: string | null;
}
