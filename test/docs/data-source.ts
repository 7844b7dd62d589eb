// #region data-source
// data-source.ts: the DataSource the TypeORM CLI loads (`typeorm migration:run -d ...`).
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { DB_LOCK_ENTITIES, DB_LOCK_MIGRATIONS } from '../../lib/index.js';

export default new DataSource({
  type: 'mysql',
  url: process.env.DATABASE_URL,
  // Plain arrays: assign them as they are, or spread them beside your own.
  entities: DB_LOCK_ENTITIES, // or [...myEntities, ...DB_LOCK_ENTITIES]
  migrations: DB_LOCK_MIGRATIONS, // or [...myMigrations, ...DB_LOCK_MIGRATIONS]
});
// #endregion data-source
