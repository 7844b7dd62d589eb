/**
 * The lease strategy's hot-key floor: a contended lease hold's statements as the library sends
 * them, by hand on plain connections, with no client code between them. The caller parks on the
 * key's doorbell with its grant behind it in the same round trip (the bell wait; the log row's
 * INSERT claiming the next token; the wait's result with that token), runs the critical section on
 * its own connection, then ends its log row and rings the bell in one round trip. The statements
 * come from the library's own plan builders, so they follow its changes. Not a lock to ship: it
 * trusts the bell alone to decide who goes next (the library's statements still check the log).
 */
import mysql from 'mysql2/promise';
import { afterBellClaimPlan } from '../../../lib/store/mysql/fast-grant.sql.js';
import { endRowsPlan } from '../../../lib/store/mysql/hold.sql.js';
import { bellStatements } from '../../../lib/store/mysql/doorbells.js';
import { benchGrantInput } from './grant-input.js';
import { countedQuery, type DesignDeps, type LockDesign, SlotConnections, timedHold } from './types.js';

/** The bell wait, the grant's INSERT, the wait's result with the claimed token; the release and the ring; the critical section. */
const USEFUL_STATEMENTS = 3 + 2 + 2;

export function leaseByHandDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  // Each caller's own session for the bell and the grant (a bell is a session's named lock), as the library's doorbell connections.
  const bells = new SlotConnections(async () => {
    const connection = await mysql.createConnection({ ...deps.settings, multipleStatements: true });
    await connection.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = 1, time_zone = '+00:00'");
    return connection;
  });
  const bellOf = (key: string) => `bench:hand-bell:${key}`;
  return {
    id: 'lease-hand',
    usefulStatements: USEFUL_STATEMENTS,
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare(key) {
      const query = countedQuery(await deps.slots.get(0), { sent: 0 });
      await query('INSERT IGNORE INTO db_lock (lock_key, fencing_token) VALUES (?, 0)', [Buffer.from(key)]);
      // An ended exclusive hold as the key's first claim, as the library's first grant leaves it: the bell's grant claims above it.
      await query(
        'INSERT IGNORE INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ' +
          "VALUES (?, 'write', UUID(), 'bench:hand', 'lease', 0, 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        [Buffer.from(key)],
      );
    },
    async hold(key, slot, body) {
      const bell = countedQuery(await bells.get(slot), counter);
      const query = countedQuery(await deps.slots.get(slot), counter);
      const name = bellOf(key);
      const grant = afterBellClaimPlan(benchGrantInput(key, { holder: 'bench:hand', processId: '0', doorbell: name, claims: true }), Date.now);
      // The bell's wait with its result kept for the batch's last statement, as the library's waiter sends it.
      const statements = [bellStatements.waitInto(name, 60_000), ...grant.statements, `${bellStatements.waitResult}, ${grant.readBack}`];
      const results = (await bell(statements.join(';\n'))) as unknown as unknown[];
      const outcome = grant.parse(results.slice(1));
      if (!outcome.granted) throw new Error(`lease by hand: the grant after the bell was refused on '${key}'`);
      const end = endRowsPlan([outcome.rows[0]!.id], 'RELEASED');
      return timedHold(
        () => body(query),
        () => bell([...end.statements, bellStatements.ring(name)].join(';\n')),
      );
    },
    roundTrips: () => counter.sent,
    redisCommands: () => 0,
    async close() {
      await bells.close();
    },
  };
}
