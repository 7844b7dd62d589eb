import { LockEntity } from './lock.entity.js';
import { LockLogEntity } from './lock-log.entity.js';

export { LockEntity, LockLogEntity };

/** For apps that list their entities by hand: `entities: [...mine, ...DB_LOCK_ENTITIES]`. */
export const DB_LOCK_ENTITIES = Object.freeze([LockEntity, LockLogEntity]);
