import type { DataSource } from 'typeorm';

/**
 * The two SQL dialects the sample speaks. MariaDB is 'mysql': same driver (mysql2), same SQL for
 * everything the sample does.
 */
export type DatabaseKind = 'mysql' | 'postgres';

/** What each URL scheme means; anything else is refused by readSampleConfig. */
export const URL_SCHEMES: Readonly<Record<string, DatabaseKind>> = {
  'mysql:': 'mysql',
  'mariadb:': 'mysql',
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
};

/** The kind of server a DB_LOCK_SAMPLE_URL points at, from its scheme. */
export function kindOfUrl(url: URL): DatabaseKind {
  const kind = URL_SCHEMES[url.protocol];
  if (!kind) throw new Error(`not a database URL scheme: '${url.protocol}//'`);
  return kind;
}

/** The kind of the app's DataSource, for the few statements written per dialect. */
export function kindOf(dataSource: DataSource): DatabaseKind {
  return dataSource.options.type === 'postgres' ? 'postgres' : 'mysql';
}
