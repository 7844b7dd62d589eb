import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintColumn } from '../../common/bigint-column.js';

/** A borrower's loan. Invariant: outstanding + repaid = principal. */
@Entity({ name: 'p2p_loan' })
export class Loan {
  @PrimaryColumn({ type: 'int' })
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  borrower!: string;

  @Column(bigintColumn('principal_cents'))
  principalCents!: number;

  @Column(bigintColumn('outstanding_cents'))
  outstandingCents!: number;

  @Column(bigintColumn('repaid_cents'))
  repaidCents!: number;

  @Column({ type: 'int' })
  repayments!: number;
}
