import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createRoutineStatement, SESSION_ROUTINES } from '../../lib/store/mysql/session-routines.sql.js';

/**
 * The bodies shipped migrations install, by routine name. A migration that already ran never runs
 * again, so an installed `_v1` keeps the body it was created with: if the text generated today
 * differed, apps migrated earlier and apps migrated later would run different routines under one
 * name. Some bodies are built from the same statement builders as the library's other SQL (the
 * begin-and-take routine from the one-statement take), so an edit there would change them silently.
 */
const SHIPPED: Record<(typeof SESSION_ROUTINES)[number], string> = {
  db_lock_end_and_commit_v1: '6a11a6a4d0629a994223808ca79e48ca19c0299c1ea664120d322ce2f4e34dcb',
  db_lock_record_and_commit_v1: 'dab7e33c61c4310c7ac776bde194cf7a6107fad81fe04bf246033f3763889d78',
  db_lock_begin_and_take_v1: 'ab9ebe9f75bdde0a4aa3db649d19abf56a67feeb210d055272c339a4b7b76a19',
};

describe('session routines: a shipped name keeps its body', () => {
  for (const routine of SESSION_ROUTINES) {
    it(`${routine}: the body generated now is the one its migration shipped`, () => {
      const body = createRoutineStatement(routine);
      assert.equal(
        createHash('sha256').update(body).digest('hex'),
        SHIPPED[routine],
        `The body of ${routine} changed. Give the new body a new name (a _v2) and a migration that installs it, ` +
          `and keep generating the old text for the old name.\n${body}`,
      );
    });
  }

  it('every routine the library may call is pinned', () => {
    assert.deepEqual([...SESSION_ROUTINES].sort(), Object.keys(SHIPPED).sort());
  });
});
