import { Column, Entity, PrimaryColumn } from 'typeorm';
import { LOCK_TABLE } from '../store/tables.js';

/**
 * One row per key: the point where grants of that key serialise, and the key's fencing counter.
 * Who holds the key lives in the log rows (one per holder, each with its own lease), so a
 * reader's crash expires only that reader. Created on first use, reaped by the janitor when idle.
 */
@Entity({ name: LOCK_TABLE, synchronize: false })
export class LockEntity {
  /** Namespaced key as UTF-8 bytes. Binary: 'k', 'K' and 'k ' are three keys (no collation folds or pads). */
  @PrimaryColumn({ name: 'lock_key', type: 'varchar', length: 764, charset: 'binary' })
  key!: Buffer;

  /** Grows by one on every grant of this key, in the granting transaction; never reset. */
  @Column({ name: 'fencing_token', type: 'bigint', unsigned: true, default: 0 })
  fencingToken!: string;

  /** While in the future, a writer is waiting and new readers are held back (server UTC). */
  @Column({ name: 'writer_waiting_until', type: Date, precision: 6, nullable: true })
  writerWaitingUntil!: Date | null;

  /** Server UTC time of the last grant; the janitor reaps rows idle for long. */
  @Column({ name: 'last_granted_at', type: Date, precision: 6, nullable: true })
  lastGrantedAt!: Date | null;

  /** The limit this key's semaphore permits are in use with (set by each permit's grant); null for a key only ever locked. */
  @Column({ name: 'semaphore_limit', type: 'int', unsigned: true, nullable: true })
  semaphoreLimit!: number | null;

  /** 1 while the key's latest grant was a row-lock writer's: no lease holder can be live (row-lock's one-UPDATE path). */
  @Column({ name: 'no_lease_holders', type: 'smallint', default: 0 })
  noLeaseHolders!: number;
}
