import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import mysql from 'mysql2/promise';
import { AppModule } from './app.module.js';
import { databaseName, sampleConfig } from './sample-config.js';

/** Creates the sample's database if it does not exist yet, so `npm run sample` needs no setup. */
async function ensureDatabase(): Promise<void> {
  const url = sampleConfig.url;
  const connection = await mysql.createConnection({
    host: url.hostname,
    port: Number(url.port || 3306),
    user: decodeURIComponent(url.username || 'root'),
    password: decodeURIComponent(url.password),
  });
  try {
    await connection.query(`CREATE DATABASE IF NOT EXISTS \`${databaseName().replace(/`/g, '')}\``);
  } finally {
    await connection.end();
  }
}

async function main(): Promise<void> {
  await ensureDatabase();
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  await app.listen(sampleConfig.port);
  const base = `http://localhost:${sampleConfig.port}`;
  const logger = new Logger('Sample');
  logger.log(`Listening on ${base}`);
  logger.log(`Try: curl -X POST ${base}/loans/1/repay -H 'content-type: application/json' -d '{"cents":500}'`);
  logger.log(`     curl ${base}/loans/1/lock`);
}

main().catch((error: unknown) => {
  new Logger('Sample').error(error);
  process.exit(1);
});
