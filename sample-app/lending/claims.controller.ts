import { Body, Controller, Param, Post } from '@nestjs/common';
import { type ClaimTransferReceipt, ClaimTransfersService } from './claim-transfers.service.js';
import { ClaimParams } from './dto/params.dto.js';
import { TransferClaimDto } from './dto/transfer-claim.dto.js';

@Controller('loans/:loanId/claims')
export class ClaimsController {
  constructor(private readonly transfers: ClaimTransfersService) {}

  /**
   * Sells the claim to `buyerId`. 201 with the receipt; 400 bad input; 404 unknown claim (or a
   * claim of another loan) or buyer; 409 the buyer already holds it; 423 lock busy.
   */
  @Post(':claimId/transfer')
  transfer(@Param() { loanId, claimId }: ClaimParams, @Body() body: TransferClaimDto): Promise<ClaimTransferReceipt> {
    return this.transfers.transfer(loanId, claimId, body.buyerId);
  }
}
