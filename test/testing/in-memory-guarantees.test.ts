import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService } from '../../lib/index.js';
import { DbLockTestingModule } from '../../lib/testing/index.js';
import { inProcessGuarantees } from '../support/in-process-guarantees.js';

/** The shared in-process guarantees (also run on the database by test/contract) against the testing module. */
inProcessGuarantees('in-memory DbLockTestingModule', async (options) => {
  @Module({ imports: [DbLockTestingModule.forRoot(options)] })
  class InMemoryApp {}
  const app = await NestFactory.createApplicationContext(InMemoryApp, { logger: false });
  await app.init();
  const locks = app.get(LockService);
  return { locks, peer: locks, close: () => app.close() };
});
