import { Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DB_LOCK_MIGRATIONS, DbLockModule } from '../lib/index.js';
import { LockExceptionFilter } from './lock-exception.filter.js';
import { Loan } from './loans/loan.entity.js';
import { LoansController } from './loans/loans.controller.js';
import { LoansService } from './loans/loans.service.js';
import { CreateSampleTables1763769600001 } from './migrations/create-sample-tables.migration.js';
import { databaseName, sampleConfig } from './sample-config.js';

const url = sampleConfig.url;

@Module({
  imports: [
    TypeOrmModule.forRoot({
      type: 'mysql',
      host: url.hostname,
      port: Number(url.port || 3306),
      username: decodeURIComponent(url.username || 'root'),
      password: decodeURIComponent(url.password),
      database: databaseName(),
      entities: [Loan],
      autoLoadEntities: true,
      migrations: [...DB_LOCK_MIGRATIONS, CreateSampleTables1763769600001],
      migrationsRun: true,
      synchronize: false,
    }),
    TypeOrmModule.forFeature([Loan]),
    DbLockModule.forRoot({ namespace: 'sample', leaseMs: 10_000, janitor: { intervalMs: 60_000 } }),
    ScheduleModule.forRoot(),
  ],
  controllers: [LoansController],
  providers: [LoansService, { provide: APP_FILTER, useClass: LockExceptionFilter }],
})
export class AppModule {}
