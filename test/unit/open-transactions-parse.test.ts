import { it } from 'node:test';
import assert from 'node:assert/strict';
import { parseTransactions } from '../support/open-transactions.js';

// Shaped as MariaDB 10.11 prints it: a lock waiter, an idle open transaction, a session with none.
const MARIADB = `
------------
TRANSACTIONS
------------
LIST OF TRANSACTIONS FOR EACH SESSION:
---TRANSACTION 105035, ACTIVE 1 sec inserting
mysql tables in use 1, locked 1
LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)
MariaDB thread id 5902, OS thread handle 131550964029120, query id 249579 127.0.0.1 root Update
INSERT INTO trxq /* blocker */ VALUES (1)
------- TRX HAS BEEN WAITING 201444 us FOR THIS LOCK TO BE GRANTED:
------------------
---TRANSACTION 105034, ACTIVE 1 sec
2 lock struct(s), heap size 1128, 1 row lock(s), undo log entries 3
MariaDB thread id 5901, OS thread handle 140347184305856, query id 249578 127.0.0.1 root 
---TRANSACTION (0x7fa53424cb80), not started
0 lock struct(s), heap size 1128, 0 row lock(s)
--------
FILE I/O
--------
MySQL thread id 9999 (not a transaction: another section)
`;

it('reads the active transactions of a status text, with lock waits and rows changed', () => {
  const found = parseTransactions(MARIADB);
  assert.deepEqual(
    found.map(({ threadId, lockWait, rowsModified }) => ({ threadId, lockWait, rowsModified })),
    [
      { threadId: 5902, lockWait: true, rowsModified: 0 },
      { threadId: 5901, lockWait: false, rowsModified: 3 },
    ],
  );
  assert.ok(found[0]!.text.includes('blocker'), 'the running statement is in its entry');
  assert.ok(!found[1]!.text.includes('FILE I/O'), 'the next section is not');
});

it("MySQL's wording of the thread line, and a text with no transaction list", () => {
  const mysql = MARIADB.replaceAll('MariaDB thread id', 'MySQL thread id');
  assert.deepEqual(
    parseTransactions(mysql).map((t) => t.threadId),
    [5902, 5901],
  );
  assert.deepEqual(parseTransactions('no list here'), []);
});
