import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { kindOf } from '../database/database-kind.js';
import { Claim } from './entities/claim.entity.js';
import { Investor } from './entities/investor.entity.js';
import { Loan } from './entities/loan.entity.js';
import { SEED_CLAIMS, SEED_INVESTORS, SEED_LOANS } from './seed-data.js';

/**
 * Fills an empty database on first start. Every row has a fixed id and goes in with INSERT
 * IGNORE (ON CONFLICT DO NOTHING on PostgreSQL), so restarts, and several instances starting at
 * once, change nothing that exists.
 * (Schema changes are migrations; data a demo needs is this.)
 */
@Injectable()
export class SeedService implements OnApplicationBootstrap {
  private readonly logger = new Logger(SeedService.name);

  constructor(private readonly dataSource: DataSource) {}

  async onApplicationBootstrap(): Promise<void> {
    const inserted = await this.dataSource.transaction(async (em) => {
      let rows = 0;
      // Parents before children: claims reference loans and investors.
      for (const [entity, values] of [
        [Investor, SEED_INVESTORS],
        [Loan, SEED_LOANS],
        [Claim, SEED_CLAIMS],
      ] as const) {
        // orIgnore: INSERT IGNORE on MySQL, ON CONFLICT DO NOTHING on PostgreSQL. The count of
        // rows inserted comes back as mysql2's affectedRows; PostgreSQL returns one row per
        // inserted row, asked for with RETURNING (MySQL has no RETURNING).
        const insert = em
          .createQueryBuilder()
          .insert()
          .into(entity)
          .values([...values])
          .orIgnore();
        if (kindOf(this.dataSource) === 'postgres') rows += ((await insert.returning('id').execute()).raw as unknown[]).length;
        else rows += Number(((await insert.execute()).raw as { affectedRows?: number }).affectedRows ?? 0);
      }
      return rows;
    });
    if (inserted > 0)
      this.logger.log(`Seeded ${inserted} rows: ${SEED_INVESTORS.length} investors, ${SEED_LOANS.length} loans, ${SEED_CLAIMS.length} claims`);
  }
}
