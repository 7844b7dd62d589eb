import { IsInt, Max, Min } from 'class-validator';
import { MAX_ID } from '../../common/validation.js';

/** Body of `POST /loans/:loanId/claims/:claimId/transfer`: `{ "buyerId": 7 }`. */
export class TransferClaimDto {
  /** The investor who buys the claim; must differ from its current owner (409 otherwise). */
  @Max(MAX_ID)
  @Min(1)
  @IsInt() // checked first: decorators apply bottom-up
  buyerId!: number;
}
