import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LockLogEntity } from '../nestjs-db-lock.js';
import { LocksController } from './locks.controller.js';

/** `GET /locks` and `GET /locks/log`: what is held, and what happened. */
@Module({
  imports: [TypeOrmModule.forFeature([LockLogEntity])],
  controllers: [LocksController],
})
export class LocksModule {}
