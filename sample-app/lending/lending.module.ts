import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClaimTransfersService } from './claim-transfers.service.js';
import { ClaimsController } from './claims.controller.js';
import { ClaimTransfer } from './entities/claim-transfer.entity.js';
import { Claim } from './entities/claim.entity.js';
import { Investor } from './entities/investor.entity.js';
import { Loan } from './entities/loan.entity.js';
import { Reconciliation } from './entities/reconciliation.entity.js';
import { Repayment } from './entities/repayment.entity.js';
import { InvestorsController } from './investors.controller.js';
import { LoansController } from './loans.controller.js';
import { LoansService } from './loans.service.js';
import { ReconciliationService } from './reconciliation.service.js';
import { RepaymentsService } from './repayments.service.js';
import { SeedService } from './seed.service.js';

/** The P2P lending case: loans, claims, investors' accounts. LockService comes from the global DbLockModule. */
@Module({
  imports: [TypeOrmModule.forFeature([Investor, Loan, Claim, Repayment, ClaimTransfer, Reconciliation])],
  controllers: [LoansController, ClaimsController, InvestorsController],
  providers: [LoansService, RepaymentsService, ClaimTransfersService, ReconciliationService, SeedService],
})
export class LendingModule {}
