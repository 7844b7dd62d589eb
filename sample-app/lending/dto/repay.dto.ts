import { IsInt, Max, Min } from 'class-validator';

/** Largest single repayment accepted, in cents (1,000,000.00). */
export const MAX_REPAYMENT_CENTS = 100_000_000;

/** Body of `POST /loans/:id/repay`: `{ "cents": 500 }`. */
export class RepayDto {
  /**
   * Whole cents: money is never a float. A JSON number, 1 to MAX_REPAYMENT_CENTS.
   * (IsInt written last: decorators apply bottom-up, and the pipe reports the first that fails.)
   */
  @Max(MAX_REPAYMENT_CENTS)
  @Min(1)
  @IsInt()
  cents!: number;
}
