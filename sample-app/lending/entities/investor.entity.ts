import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintColumn } from '../../common/bigint-column.js';

/** An investor's account: repayments of the loans they hold claims on are paid into it. */
@Entity({ name: 'p2p_investor' })
export class Investor {
  @PrimaryColumn({ type: 'int' })
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  name!: string;

  /** Balance when the account was opened: what the reconciliation counts payouts from. */
  @Column(bigintColumn('opening_cents'))
  openingCents!: number;

  @Column(bigintColumn('balance_cents'))
  balanceCents!: number;
}
