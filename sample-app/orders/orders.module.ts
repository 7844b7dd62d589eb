import { Module } from '@nestjs/common';
import { OrderNumbersService } from './order-numbers.service.js';
import { OrdersController } from './orders.controller.js';

/** Order numbers from a per-day counter row, incremented under a lock. */
@Module({
  controllers: [OrdersController],
  providers: [OrderNumbersService],
})
export class OrdersModule {}
