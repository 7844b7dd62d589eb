import { DbLockError } from './db-lock.error.js';

/** Options that cannot work. Lists every problem at once, so one fix round is enough. */
export class DbLockOptionsError extends DbLockError {
  constructor(
    /** One line per problem, each naming the option and the value. */
    readonly problems: readonly string[],
    where = 'DbLockModule options',
  ) {
    super(`Invalid ${where}:\n  - ${problems.join('\n  - ')}`);
  }
}
