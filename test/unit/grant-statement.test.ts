import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GRANT_ROWS_INDEX, GRANT_SUMMARY_INDEX, grantStatement } from '../../lib/storage/lock-sql.js';
import { resolveTargets } from '../../lib/lock-key.js';

describe('grant statement layout', () => {
  for (const keys of [['a'], ['b', { key: 'a', mode: 'read' as const }]]) {
    it(`result indexes point at the summary and the granted rows (${JSON.stringify(keys)})`, () => {
      const sql = grantStatement({
        owner: '00000000-0000-4000-8000-000000000000',
        holder: 'h:1',
        targets: resolveTargets(keys, 'write', ''),
        leaseMs: 1000,
        waitedMs: 0,
        writerWaitMarkMs: 900,
        writerPreference: true,
      });
      const statements = sql.split(';\n');
      assert.match(statements[GRANT_SUMMARY_INDEX]!, /^SELECT @dbl_granted AS granted/);
      assert.match(statements[GRANT_ROWS_INDEX]!, /^SELECT id, lock_key, fencing_token, expires_at FROM db_lock_log WHERE owner = /);
      assert.equal(statements.at(-1), 'COMMIT');
      // The takeover comes before our own rows exist, and the recount between them decides.
      const takeover = statements.findIndex((s) => s.includes("SET status = 'EXPIRED'"));
      const recount = statements.findIndex((s) => s.includes('INTO @dbl_revived'));
      const insert = statements.findIndex((s) => s.startsWith('INSERT INTO db_lock_log'));
      assert.ok(takeover < recount && recount < insert);
    });
  }
});
