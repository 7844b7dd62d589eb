/** Settings of the sample app, from the environment. */
export const sampleConfig = Object.freeze({
  /** Server and database: the database is created if missing. */
  url: new URL(process.env.DB_LOCK_SAMPLE_URL ?? 'mysql://root@127.0.0.1:3306/dblock_sample'),
  port: Number(process.env.PORT ?? 3000),
});

export function databaseName(): string {
  return sampleConfig.url.pathname.replace(/^\//, '') || 'dblock_sample';
}
