/** Builds what the designs need from a running app, in the bench's process or in a worker. */
import mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import type { LockService } from '../../../lib/index.js';
import type { ConnectionSettings } from '../../support/test-database.js';
import { spyOnDataSourceStatements } from '../../support/statement-spy.js';
import { type DesignDeps, SlotConnections } from './types.js';

/**
 * Counts the statements sent on `dataSource`'s connections, which the library's own stats leave
 * out: row-lock transactions and fenced 'requires-new' transactions live on the DataSource.
 */
export function countDataSourceQueries(dataSource: DataSource): () => number {
  const { sent } = spyOnDataSourceStatements(dataSource);
  return () => sent.length;
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
