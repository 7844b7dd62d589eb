import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { bigintColumn } from '../../common/bigint-column.js';

/** One run of the reconciliation job (on whichever instance got its lock). */
@Entity({ name: 'p2p_reconciliation' })
export class Reconciliation {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id!: string;

  /** host:pid of the instance that ran it. */
  @Column({ type: 'varchar', length: 255 })
  holder!: string;

  @Column({ type: 'boolean' })
  balanced!: boolean;

  /** What investors received in total (balances minus opening balances). */
  @Column(bigintColumn('paid_out_cents'))
  paidOutCents!: number;

  /** What borrowers repaid in total. */
  @Column(bigintColumn('repaid_cents'))
  repaidCents!: number;

  // No type: each driver's own (DATETIME on MySQL, a timestamp on PostgreSQL); the migration made it.
  @CreateDateColumn({ name: 'created_at', precision: 6 })
  createdAt!: Date;
}
