/** Builds what the designs need from a running app, in the bench's process or in a worker. */
import mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import type { LockService } from '../../../lib/index.js';
import type { ConnectionSettings } from '../../support/test-database.js';
import { type DesignDeps, SlotConnections } from './types.js';

const COUNTER = Symbol.for('nestjs-db-lock.bench.dataSourceQueries');

/**
 * Counts the statements sent through `dataSource` (TypeORM logs every query it sends, logging on
 * or off), which the library's own stats leave out: row-lock transactions and fenced
 * 'requires-new' transactions live on the DataSource.
 */
export function countDataSourceQueries(dataSource: DataSource): () => number {
  const logger = dataSource.logger as unknown as Record<PropertyKey, unknown> & { logQuery: (...args: unknown[]) => unknown };
  let read = logger[COUNTER] as (() => number) | undefined;
  if (!read) {
    let count = 0;
    const original = logger.logQuery.bind(logger);
    logger.logQuery = (...args: unknown[]) => {
      count++;
      return original(...args);
    };
    read = () => count;
    logger[COUNTER] = read;
  }
  return read;
}

export function designDeps(locks: LockService, dataSource: DataSource, settings: ConnectionSettings, redisUrl: string): DesignDeps {
  return {
    locks,
    dataSource,
    settings,
    slots: new SlotConnections(() => mysql.createConnection({ ...settings })),
    redisUrl,
    holder: `pid:${process.pid}`,
    dataSourceQueries: countDataSourceQueries(dataSource),
  };
}
