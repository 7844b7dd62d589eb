import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { bigintColumn } from '../../common/bigint-column.js';

/** One applied repayment, with the fencing token of the write lock it ran under. */
@Entity({ name: 'p2p_repayment' })
export class Repayment {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id!: string;

  @Column({ name: 'loan_id', type: 'int' })
  loanId!: number;

  @Column(bigintColumn('cents'))
  cents!: number;

  /** Grows with every grant of the loan's lock: repayments of a loan are ordered by it. */
  @Column(bigintColumn('fencing_token'))
  fencingToken!: number;

  // No type: each driver's own (DATETIME on MySQL, a timestamp on PostgreSQL); the migration made it.
  @CreateDateColumn({ name: 'created_at', precision: 6 })
  createdAt!: Date;
}
