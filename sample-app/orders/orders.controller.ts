import { Controller, Post } from '@nestjs/common';
import { type OrderNumber, OrderNumbersService } from './order-numbers.service.js';

@Controller('orders')
export class OrdersController {
  constructor(private readonly numbers: OrderNumbersService) {}

  /** 201 `{ orderNumber: 'ORD-20261123-000042', fencingToken }`; 423 if the counter's lock stays busy. */
  @Post()
  create(): Promise<OrderNumber> {
    return this.numbers.next();
  }
}
