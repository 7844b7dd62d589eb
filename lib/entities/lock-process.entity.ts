import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { PROCESS_TABLE } from '../store/tables.js';

/**
 * One row per running LockService (a process): its lease. Holders point to it, so one renewal
 * of this row keeps every lock the process holds alive, whatever their number.
 */
@Entity({ name: PROCESS_TABLE, synchronize: false })
export class LockProcessEntity {
  /** Row id (the log rows' `process_id`). */
  @PrimaryGeneratedColumn({ type: 'bigint', unsigned: true })
  id!: string;

  /** host:pid, for people reading the table. */
  @Column({ type: 'varchar', length: 255 })
  holder!: string;

  /** When the LockService started (server clock, UTC). */
  @Column({ name: 'started_at', type: Date, precision: 6 })
  startedAt!: Date;

  /** Server UTC time of the latest renewal: each holder's lease runs from here (or from its grant). */
  @Column({ name: 'renewed_at', type: Date, precision: 6 })
  renewedAt!: Date;

  /** Grows whenever another session ends one of this process's live holders: tells the renewal to look. */
  @Column({ name: 'ended_count', type: 'bigint', unsigned: true, default: 0 })
  endedCount!: string;
}
