import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { beginAndTakeCall, takenByCall } from '../../lib/store/mysql/row-lock-grant.js';
import { insertAuditRows, takeWriteKeys } from '../../lib/store/mysql/row-lock.sql.js';
import { SINGLE_MARIADB, type ServerFlavor } from '../../lib/store/mysql/server-flavor.js';
import { BEGIN_AND_TAKE, callRecordAndCommit, createRoutineStatement, RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';
import { format } from '../../lib/store/mysql/sql.js';

const MYSQL: ServerFlavor = { ...SINGLE_MARIADB, kind: 'mysql', sharedLockClause: 'FOR SHARE', statementTimeLimit: false };
const inMs = (ms: number): number => performance.now() + ms;

describe('row-lock: the begin-and-take routine', () => {
  it("its UPDATE is the one-statement take's, with the routine's parameter for the key", () => {
    const body = createRoutineStatement(BEGIN_AND_TAKE);
    const single = takeWriteKeys([Buffer.from('k')]).replace(/lock_key IN \([^)]*\)/, 'lock_key = p_key');
    assert.ok(body.includes(`START TRANSACTION;\n  ${single};\n`), body);
    assert.match(body, /SELECT ROW_COUNT\(\) AS taken, LAST_INSERT_ID\(\) AS token;\nEND$/);
  });

  it('is called for one write key only, bounded in the statement on MariaDB, and not on MySQL when the wait is bounded', () => {
    const write = resolveTargets('k', 'write', '');
    assert.equal(beginAndTakeCall(write, Infinity, SINGLE_MARIADB), "CALL `db_lock_begin_and_take_v1`(X'6b')");
    assert.equal(beginAndTakeCall(write, Infinity, MYSQL), "CALL `db_lock_begin_and_take_v1`(X'6b')");
    assert.match(
      beginAndTakeCall(write, inMs(1500), SINGLE_MARIADB)!,
      /^SET STATEMENT max_statement_time = 1\.[45]\d\d FOR CALL `db_lock_begin_and_take_v1`\(X'6b'\)$/,
    );
    assert.equal(
      beginAndTakeCall(write, 0, SINGLE_MARIADB),
      "SET STATEMENT innodb_lock_wait_timeout = 0 FOR CALL `db_lock_begin_and_take_v1`(X'6b')",
    );
    assert.equal(beginAndTakeCall(write, inMs(1500), MYSQL), undefined, 'MySQL bounds only a locking read: the transaction opens apart');
    assert.equal(beginAndTakeCall(resolveTargets('k', 'read', ''), Infinity, SINGLE_MARIADB), undefined);
    assert.equal(beginAndTakeCall(resolveTargets(['a', 'b'], 'write', ''), Infinity, SINGLE_MARIADB), undefined);
  });

  it("reads the routine's one-row answer: the token when it took the row, else the log must be read", () => {
    const targets = resolveTargets('k', 'write', '');
    assert.deepEqual(takenByCall([[{ taken: 1, token: '42' }], { affectedRows: 0 }], targets), {
      taken: true,
      tokens: new Map([[targets[0]!.storedKey, 42]]),
    });
    assert.deepEqual(takenByCall([[{ taken: 0, token: '41' }], { affectedRows: 0 }], targets), { taken: false, why: 'check-log' });
  });
});

describe('row-lock: the record-and-commit CALL', () => {
  it('is built by hand exactly as format() writes it, hostile keys and holder names included', () => {
    const keys = [Buffer.from('k'), Buffer.from("a'b\\c\u0000d"), Buffer.alloc(764, 0xff), Buffer.alloc(0)];
    const holders = ['host:1', "o'brien\\\n\u0000:7"];
    for (const key of keys)
      for (const holder of holders)
        for (const mode of ['write', 'read'] as const) {
          const row = {
            key,
            mode,
            owner: '0b7e4c1e-6a4e-4d59-9f55-0f3b8f5a2c11',
            fencingToken: 9_007_199_254_740_991,
            waitedMs: 12.6,
            holdMs: 3.4567,
            status: 'RELEASED' as const,
            note: null,
          };
          const expected = format(`CALL \`${RECORD_AND_COMMIT}\`(?, ?, ?, ?, ?, ?, ?, ?)`, [
            key,
            mode,
            row.owner,
            holder,
            row.fencingToken,
            3457,
            13,
            3,
          ]);
          assert.equal(callRecordAndCommit(row, holder), expected);
        }
  });

  it('sends 0 for a duration that is not a positive number, rather than failing the commit it rides in', () => {
    const row = {
      key: Buffer.from('k'),
      mode: 'write' as const,
      owner: 'o',
      fencingToken: 5,
      waitedMs: Number.NaN,
      holdMs: -1,
      status: 'RELEASED' as const,
      note: null,
    };
    assert.equal(callRecordAndCommit(row, 'h'), "CALL `db_lock_record_and_commit_v1`(X'6b', 'write', 'o', 'h', 5, 0, 0, 0)");
    // The same figures in the batched audit rows of holds that did not commit.
    const batched = insertAuditRows([{ ...row, status: 'FAILED', note: "it's gone" }], 'h');
    assert.doesNotMatch(batched, /NaN|-1/);
    assert.match(
      batched,
      /VALUES \(X'6b', 'write', 'o', 'h', 'row-lock', 5, 'FAILED', 0, UTC_TIMESTAMP\(6\) - INTERVAL 0 MICROSECOND, UTC_TIMESTAMP\(6\), UTC_TIMESTAMP\(6\), 0, 0, 'it\\'s gone'\)$/,
    );
  });
});
