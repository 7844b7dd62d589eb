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

  @CreateDateColumn({ name: 'created_at', type: 'datetime', precision: 6 })
  createdAt!: Date;
}
