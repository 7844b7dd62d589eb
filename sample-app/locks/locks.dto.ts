import { IsOptional, Matches } from 'class-validator';
import { IsIdParam } from '../common/validation.js';

/** `GET /locks?limit=100&after=<next>` */
export class ListLocksQuery {
  /** 1 to 1000 holders per page. */
  @IsOptional()
  @IsIdParam(1_000)
  limit?: number;

  /** The `next` of the previous page. Checked here: the library would reject it too, but as a 5xx-looking options error. */
  @IsOptional()
  @Matches(/^\d{1,20}$/, { message: "after must be the 'next' value of a previous page" })
  after?: string;
}

/** `GET /locks/log?limit=50` */
export class LockLogQuery {
  /** 1 to 500 rows, newest first. */
  @IsOptional()
  @IsIdParam(500)
  limit: number = 50;
}

/** One row of the lock log as the API shows it. */
export interface LockLogRow {
  id: number;
  /** As stored: namespace included (`p2p:loan:1`). */
  key: string;
  mode: string;
  holder: string;
  fencingToken: number;
  /** ACQUIRED / COMPLETED (live), RELEASED / FAILED / EXPIRED (ended). */
  status: string;
  acquiredAt: Date;
  endedAt: Date | null;
  waitMs: number;
  holdMs: number | null;
  note: string | null;
}
