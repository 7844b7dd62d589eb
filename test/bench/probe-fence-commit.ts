/**
 * Development probe: what ending a lease lock inside the business commit costs the server, by hand
 * on one connection, interleaved op by op: a plain transaction with one UPDATE; the same with the
 * log row's end and COMMIT in one CALL of the fenced-commit routine (the library's); the same end as
 * plain statements, with the hold worked out by the server or sent by the client.
 * `node build/test/bench/probe-fence-commit.js [ops]`
 */
import 'reflect-metadata';
import type mysql from 'mysql2/promise';
import { probeShapesOnOneConnection, runProbe } from './probe-main.js';
import { claimGrantShape } from './uncontended-items.js';
import { END_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';

const OWNER = '11111111-2222-3333-4444-555555555555';

async function shapesOf(c: mysql.Connection): Promise<Record<string, () => Promise<unknown>>> {
  let token = 0;
  const grant = async () => {
    const [r] = (await c.query(claimGrantShape(++token).replace('UUID()', `'${OWNER}'`))) as unknown as [{ insertId: number }];
    return r.insertId;
  };
  const live = "status IN ('ACQUIRED', 'COMPLETED')";
  const shapes: Record<string, () => Promise<unknown>> = {
    'plain: START; UPDATE; COMMIT': async () => {
      await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query('COMMIT');
    },
    'CALL end_and_commit': async () => {
      const id = await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query(`CALL \`${END_AND_COMMIT}\`(${id}, '${OWNER}')`);
    },
    'UPDATE (server hold); COMMIT': async () => {
      const id = await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query(
        `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)) DIV 1000 WHERE id = ${id} AND ${live}; COMMIT`,
      );
    },
    'UPDATE (client hold); COMMIT': async () => {
      const id = await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query(
        `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 1 WHERE id = ${id} AND ${live}; COMMIT`,
      );
    },
    'UPDATE (server hold), then COMMIT': async () => {
      const id = await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query(
        `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)) DIV 1000 WHERE id = ${id} AND ${live}`,
      );
      await c.query('COMMIT');
    },
    'UPDATE (client hold), then COMMIT': async () => {
      const id = await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query(
        `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 1 WHERE id = ${id} AND ${live}`,
      );
      await c.query('COMMIT');
    },
    'CALL v2 (client hold)': async () => {
      const id = await grant();
      await c.query('START TRANSACTION');
      await c.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await c.query(`CALL probe_end_v2(${id}, '${OWNER}', 1)`);
    },
  };
  await c.query(
    'CREATE PROCEDURE probe_end_v2(IN p_id BIGINT UNSIGNED, IN p_owner CHAR(36), IN p_hold INT UNSIGNED) MODIFIES SQL DATA BEGIN ' +
      `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = p_hold WHERE id = p_id AND ${live} AND owner = p_owner; ` +
      "IF ROW_COUNT() = 1 THEN COMMIT; ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lost'; END IF; END",
  );
  return shapes;
}

runProbe(() =>
  probeShapesOnOneConnection('dblock_fence', Number(process.argv[2] ?? 1000), { multipleStatements: true }, 'plain: START; UPDATE; COMMIT', shapesOf),
);
