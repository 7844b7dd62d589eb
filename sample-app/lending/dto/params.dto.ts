import { IsIdParam } from '../../common/validation.js';

/** `/loans/:id/...` */
export class LoanParams {
  @IsIdParam()
  id!: number;
}

/** `/loans/:loanId/claims/:claimId/...` */
export class ClaimParams {
  @IsIdParam()
  loanId!: number;

  @IsIdParam()
  claimId!: number;
}
