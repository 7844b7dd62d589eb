import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { LOCK_LOG_TABLE } from '../store/tables.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/**
 * One row per acquisition of one key: the audit trail, the holder as the database sees it (its
 * process lease and its own lease length) and the row every fence and every takeover writes.
 * Written by both strategies, so a key held by one strategy is seen as held by the other.
 */
@Entity({ name: LOCK_LOG_TABLE, synchronize: false })
@Index('idx_db_lock_log_key_status', ['key', 'status', 'expiresAt'])
@Index('idx_db_lock_log_status_process', ['status', 'processId'])
export class LockLogEntity {
  /** Row id. */
  @PrimaryGeneratedColumn({ type: 'bigint', unsigned: true })
  id!: string;

  /** The stored key (namespace included), as bytes. */
  @Column({ name: 'lock_key', type: 'varchar', length: 764, charset: 'binary' })
  key!: Buffer;

  /** 'read' or 'write' for a lock, 'permit' for a semaphore's permit. */
  @Column({ type: 'varchar', length: 6, charset: 'ascii', collation: 'ascii_bin' })
  mode!: 'read' | 'write' | 'permit';

  /** Acquisition id: shared by the rows of a multi-key lock. */
  @Column({ type: 'char', length: 36, charset: 'ascii', collation: 'ascii_bin' })
  owner!: string;

  /** Which process holds it: host:pid, for people reading the table. */
  @Column({ type: 'varchar', length: 255 })
  holder!: string;

  /** The key's fencing token of this grant (a bigint, as a string). */
  @Column({ name: 'fencing_token', type: 'bigint', unsigned: true })
  fencingToken!: string;

  /** ACQUIRED, COMPLETED (live); RELEASED, FAILED, EXPIRED (terminal). */
  @Column({ type: 'varchar', length: 10, charset: 'ascii', collation: 'ascii_bin' })
  status!: string;

  /** This holder's lease: it ends this long after its grant or its process's latest renewal. */
  @Column({ name: 'lease_ms', type: 'int', unsigned: true })
  leaseMs!: number;

  /** When it was granted (server clock, UTC). */
  @Column({ name: 'acquired_at', type: Date, precision: 6 })
  acquiredAt!: Date;

  /** End of the lease counted from the grant (or the latest extend()), server UTC; process renewals push it further. */
  @Column({ name: 'expires_at', type: Date, precision: 6 })
  expiresAt!: Date;

  /** When it ended (server clock, UTC); null while live. */
  @Column({ name: 'ended_at', type: Date, precision: 6, nullable: true })
  endedAt!: Date | null;

  /** How long the caller waited before the grant, in ms. */
  @Column({ name: 'wait_ms', type: 'int', unsigned: true, default: 0 })
  waitMs!: number;

  /** How long it was held, in ms; null while live. */
  @Column({ name: 'hold_ms', type: 'int', unsigned: true, nullable: true })
  holdMs!: number | null;

  /** Why it ended, when not by its holder: who took it over, a force-release reason. */
  @Column({ type: 'varchar', length: 255, nullable: true })
  note!: string | null;

  /** The process lease (db_lock_process) whose renewals keep this holder alive. */
  @Column({ name: 'process_id', type: 'bigint', unsigned: true, nullable: true })
  processId!: string | null;

  /** 'lease' or 'row-lock': which strategy granted it. */
  @Column({ type: 'varchar', length: 8, charset: 'ascii', collation: 'ascii_bin', default: 'lease' })
  strategy!: LockStrategyName;

  /** Fenced commits made under this holder while it stayed held (each one writes the row, which certifies it on a cluster). */
  @Column({ name: 'fenced_count', type: 'int', unsigned: true, default: 0 })
  fencedCount!: number;
}
