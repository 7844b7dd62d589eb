import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A P2P loan (seed 004): repayments change the balance; claim transfers only read it. */
@Entity({ name: 'sample_loan' })
export class Loan {
  @PrimaryColumn({ type: 'int' })
  id!: number;

  /** Outstanding balance in cents. */
  @Column({ type: 'bigint', transformer: { to: (v: number) => v, from: (v: string) => Number(v) } })
  balance!: number;

  @Column({ type: 'int', default: 0 })
  repayments!: number;
}
