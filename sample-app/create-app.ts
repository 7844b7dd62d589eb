import 'reflect-metadata';
import type { INestApplication, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import type { SampleConfig } from './config/sample-config.js';

/**
 * Builds the app exactly as `main.ts` runs it, without listening: the e2e tests boot this.
 * `abortOnError: false` makes a failed bootstrap an ordinary rejected promise (Nest would
 * otherwise end the process itself, before main.ts can say what went wrong).
 */
export async function createSampleApp(config: SampleConfig, logger: LogLevel[] | false = ['log', 'warn', 'error']): Promise<INestApplication> {
  const app = await NestFactory.create(AppModule.forRoot(config), { abortOnError: false, logger });
  // SIGTERM / SIGINT -> app.close(): running locked calls finish, held locks are released at once.
  app.enableShutdownHooks();
  return app;
}
