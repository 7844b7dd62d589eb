import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { bigintColumn } from '../../common/bigint-column.js';

/** One sale of a claim: the history that lets anyone re-trace a claim's owners. */
@Entity({ name: 'p2p_claim_transfer' })
export class ClaimTransfer {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id!: string;

  @Column({ name: 'claim_id', type: 'int' })
  claimId!: number;

  @Column({ name: 'loan_id', type: 'int' })
  loanId!: number;

  @Column({ name: 'from_investor_id', type: 'int' })
  fromInvestorId!: number;

  @Column({ name: 'to_investor_id', type: 'int' })
  toInvestorId!: number;

  /** The fencing token of the claim's write lock: transfers of one claim are ordered by it. */
  @Column(bigintColumn('fencing_token'))
  fencingToken!: number;

  // No type: each driver's own (DATETIME on MySQL, a timestamp on PostgreSQL); the migration made it.
  @CreateDateColumn({ name: 'created_at', precision: 6 })
  createdAt!: Date;
}
