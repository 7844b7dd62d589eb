import { after, before } from 'node:test';
import { createLockApp } from '../support/lock-app.js';
import { inProcessGuarantees } from '../support/in-process-guarantees.js';
import { contractSuite, gapOf } from '../support/contract-targets.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * The guarantees shared with the testing module's in-memory LockService (test/testing), here on
 * the database under each strategy: the peer is a second app on the same database.
 */
/**
 * PostgreSQL grants FOR SHARE beside share lockers without queueing behind a waiting FOR UPDATE,
 * so a row-lock reader is let in while a writer waits (MySQL's InnoDB queues it behind the writer).
 */
contractSuite('in-process', 'the in-process guarantees of the testing module', { postgres: true }, (target) => {
  const { strategy } = target;
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(() => db?.drop());

  inProcessGuarantees(`database, ${strategy}`, async (options) => {
    const first = await createLockApp(db.settings, { ...options, strategy });
    const second = await createLockApp(db.settings, { ...options, strategy });
    return {
      locks: first.locks,
      peer: second.locks,
      triesWait: strategy === 'row-lock',
      readersShareToken: strategy === 'row-lock',
      forceReleaseGap: gapOf('admin', target),
      close: async () => {
        await first.app.close();
        await second.app.close();
      },
    };
  });
});
