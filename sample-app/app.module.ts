import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LockExceptionFilter } from './common/lock-exception.filter.js';
import { sampleValidationPipe } from './common/validation.js';
import type { SampleConfig } from './config/sample-config.js';
import { typeOrmOptions } from './database/typeorm-options.js';
import { LendingModule } from './lending/lending.module.js';
import { LocksModule } from './locks/locks.module.js';
import { DbLockModule } from './nestjs-db-lock.js';
import { OrdersModule } from './orders/orders.module.js';

/**
 * The whole app, built from a config object (main.ts reads it from the environment; tests pass
 * their own). The global pipe and filter are providers, not `app.useGlobal...()` calls in
 * main.ts, so anything that boots this module gets the same validation and error mapping.
 */
@Module({})
export class AppModule {
  static forRoot(config: SampleConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(config)),
        DbLockModule.forRoot({
          isGlobal: true, // LockService in every feature module
          namespace: 'p2p', // keys are stored as 'p2p:loan:1': several apps can share the tables
          leaseMs: 10_000, // a crashed instance's locks are free again within 10 s
          timeoutMs: config.lockTimeoutMs, // how long a request waits for a lock before 423
        }),
        ScheduleModule.forRoot(),
        LendingModule,
        OrdersModule,
        LocksModule,
      ],
      providers: [
        { provide: APP_PIPE, useFactory: sampleValidationPipe },
        { provide: APP_FILTER, useClass: LockExceptionFilter },
      ],
    };
  }
}
