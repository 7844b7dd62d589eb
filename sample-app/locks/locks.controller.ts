import { Controller, Get, Query } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { LockLogEntity, type LockList, LockService, type LockStatsSnapshot } from '../nestjs-db-lock.js';
import { ListLocksQuery, type LockLogRow, LockLogQuery } from './locks.dto.js';

/** Operator views. In a real app, put these behind your admin auth. */
@Controller('locks')
export class LocksController {
  constructor(
    private readonly locks: LockService,
    /** The library's log table, read through the app's own DataSource like any table. */
    @InjectRepository(LockLogEntity) private readonly log: Repository<LockLogEntity>,
  ) {}

  /** Locks held right now across the cluster (this app's namespace), oldest grant first. */
  @Get()
  held(@Query() query: ListLocksQuery): Promise<LockList> {
    return this.locks.listLocks({ limit: query.limit ?? 100, ...(query.after ? { after: query.after } : {}) });
  }

  /** This instance's counters since start: grants, timeouts, skips, wait and hold times. */
  @Get('stats')
  stats(): LockStatsSnapshot {
    return this.locks.stats();
  }

  /** The newest rows of the audit trail: one per key per acquisition, with how it ended. */
  @Get('log')
  async recent(@Query() { limit }: LockLogQuery): Promise<LockLogRow[]> {
    const rows = await this.log.find({ order: { id: 'DESC' }, take: limit });
    return rows.map((r) => ({
      id: Number(r.id),
      key: r.key.toString('utf8'),
      mode: r.mode,
      holder: r.holder,
      fencingToken: Number(r.fencingToken),
      status: r.status,
      acquiredAt: r.acquiredAt,
      endedAt: r.endedAt,
      waitMs: r.waitMs,
      holdMs: r.holdMs,
      note: r.note,
    }));
  }
}
