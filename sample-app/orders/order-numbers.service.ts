import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { affectedRows } from '../database/affected-rows.js';
import { kindOf } from '../database/database-kind.js';
import { type LockHandle, LockLostError, LockService } from '../nestjs-db-lock.js';
import { CREATE_COUNTER_SQL, TODAY_SQL } from './order-counter.sql.js';

export interface OrderNumber {
  /** `ORD-20261123-000042`: the day (database server clock, UTC) and that day's sequence. */
  orderNumber: string;
  fencingToken: number;
}

/**
 * Human-readable order numbers that no two instances ever hand out twice.
 *
 * Written by hand with `withLock` rather than a decorator, because the key depends on data read
 * first (the day, from the database clock, so instances with skewed clocks agree), and to show
 * what the decorators do for you: the transaction inside the lock, and a fence by hand.
 */
@Injectable()
export class OrderNumbersService {
  constructor(
    private readonly locks: LockService,
    private readonly dataSource: DataSource,
  ) {}

  async next(): Promise<OrderNumber> {
    const [{ day }] = (await this.dataSource.query(TODAY_SQL[kindOf(this.dataSource)])) as [{ day: string }];
    // One lock per day's counter. The transaction commits inside withLock, before the release.
    return this.locks.withLock(`order-counter:${day}`, (lock) => this.dataSource.transaction((em) => this.take(em, day, lock)));
  }

  /** Read the counter, add one, write it back: a read-modify-write that only the lock makes safe. */
  private async take(em: EntityManager, day: string, lock: LockHandle): Promise<OrderNumber> {
    await em.query(CREATE_COUNTER_SQL[kindOf(this.dataSource)], [day]);
    const [row] = (await em.sql`SELECT last_value FROM p2p_order_counter WHERE day = ${day}`) as { last_value: number }[];
    const value = Number(row!.last_value) + 1;

    // The fence, by hand. A lease can run out while its holder is stalled (GC, paused VM) and
    // another instance can take over; the fencing token grows with every grant, so the stale
    // holder's older token matches no row here and its write is refused instead of handing
    // out a number twice. (A decorated method gets this for free: its fenced transaction.)
    const updated = affectedRows(
      await em.sql`UPDATE p2p_order_counter SET last_value = ${value}, fencing_token = ${lock.fencingToken}
                    WHERE day = ${day} AND fencing_token < ${lock.fencingToken}`,
    );
    if (updated !== 1) throw new LockLostError(lock.keys[0]!, lock.fencingToken, 'a holder with a newer fencing token already wrote the counter');

    const orderNumber = `ORD-${day}-${String(value).padStart(6, '0')}`;
    // The unique index on order_number is the safety net: a duplicate would fail loudly, never pass.
    await em.sql`INSERT INTO p2p_order (order_number, fencing_token) VALUES (${orderNumber}, ${lock.fencingToken})`;
    return { orderNumber, fencingToken: lock.fencingToken };
  }
}
