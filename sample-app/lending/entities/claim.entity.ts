import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintColumn } from '../../common/bigint-column.js';

/**
 * An investor's claim on part of a loan. Repayments are split over the loan's claims in
 * proportion to `principalCents` and paid to each claim's current owner; a transfer changes the
 * owner. Invariant: the claims' `receivedCents` add up to the loan's `repaidCents`.
 */
@Entity({ name: 'p2p_claim' })
export class Claim {
  @PrimaryColumn({ type: 'int' })
  id!: number;

  @Column({ name: 'loan_id', type: 'int' })
  loanId!: number;

  @Column({ name: 'investor_id', type: 'int' })
  investorId!: number;

  @Column(bigintColumn('principal_cents'))
  principalCents!: number;

  @Column(bigintColumn('received_cents'))
  receivedCents!: number;

  @Column({ type: 'int' })
  transfers!: number;
}
