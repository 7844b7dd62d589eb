import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  type ArgumentsHost,
  Catch,
  Controller,
  type ExceptionFilter,
  Get,
  Injectable,
  type INestApplication,
  type LoggerService,
  Module,
  Param,
  Post,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Cron, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import request from 'supertest';
import { DbLockModule, LockService, LockTimeoutError, WriteLock } from '../../lib/index.js';
import { eventually, typeOrmRoot } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/** What a locked method saw while it ran. */
interface Seen {
  via: string;
  keys: readonly string[];
  token: number;
  /** Fencing token of the key's holder as the database reports it during the call. */
  dbToken: number | undefined;
  /** The write went through lockService.manager inside an open transaction. */
  inTransaction: boolean;
}

const seen: Seen[] = [];

async function record(locks: LockService, via: string, key: string): Promise<void> {
  const lock = locks.currentLock!;
  const info = await locks.inspect(key);
  await locks.manager.query('INSERT INTO visits (via, lock_key) VALUES (?, ?)', [via, key]);
  // MariaDB's @@in_transaction: 1 inside an open transaction (under autocommit it would be 0).
  const [row] = (await locks.manager.query('SELECT @@in_transaction AS open')) as { open: string }[];
  seen.push({ via, keys: lock.keys, token: lock.fencingToken, dbToken: info.holders[0]?.fencingToken, inTransaction: Number(row!.open) === 1 });
}

@Injectable()
class Ledger {
  constructor(readonly locks: LockService) {}

  @WriteLock('acct:{0}', { timeoutMs: 300 })
  async credit(id: number, via: string): Promise<void> {
    await record(this.locks, via, `acct:${id}`);
  }

  /** Calls the locked method through `this`. */
  async creditViaThis(id: number): Promise<void> {
    await this.credit(id, 'this');
  }
}

@Injectable()
class Payments {
  constructor(private readonly ledger: Ledger) {}
  pay(id: number): Promise<void> {
    return this.ledger.credit(id, 'other-service');
  }
}

@Catch(LockTimeoutError)
class LockConflictFilter implements ExceptionFilter {
  catch(error: LockTimeoutError, host: ArgumentsHost): void {
    host.switchToHttp().getResponse<{ status(code: number): { json(body: unknown): void } }>().status(409).json({ key: error.key });
  }
}

@Controller('acct')
class AccountsController {
  constructor(private readonly locks: LockService) {}

  // Nest's decorator above the lock decorator...
  @Get(':id')
  @WriteLock('acct:{0}', { timeoutMs: 300 })
  async read(@Param('id') id: string): Promise<{ key: string }> {
    await record(this.locks, 'http-get', `acct:${id}`);
    return { key: `acct:${id}` };
  }

  // ...and below it.
  @WriteLock('acct:{0}', { timeoutMs: 300 })
  @Post(':id')
  async write(@Param('id') id: string): Promise<{ key: string }> {
    await record(this.locks, 'http-post', `acct:${id}`);
    return { key: `acct:${id}` };
  }
}

@Injectable()
class Jobs {
  constructor(private readonly locks: LockService) {}

  @Cron('* * * * * *', { name: 'lock-below' })
  @WriteLock('cron:below')
  async below(): Promise<void> {
    await record(this.locks, 'cron-below', 'cron:below');
  }

  @WriteLock('cron:above')
  @Cron('* * * * * *', { name: 'lock-above' })
  async above(): Promise<void> {
    await record(this.locks, 'cron-above', 'cron:above');
  }
}

class CapturingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(message: unknown): void {
    process.stderr.write(`${String(message)}\n`);
  }
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
}

describe('lock decorators on every kind of caller', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE visits (id INT AUTO_INCREMENT PRIMARY KEY, via VARCHAR(32) NOT NULL, lock_key VARCHAR(64) NOT NULL)');
    @Module({
      imports: [typeOrmRoot(db.settings), DbLockModule.forRoot({ leaseMs: 2000 }), ScheduleModule.forRoot()],
      controllers: [AccountsController],
      providers: [Ledger, Payments, Jobs],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
    app.useGlobalFilters(new LockConflictFilter());
    await app.init();
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const check = (via: string, key: string): void => {
    const entry = seen.find((s) => s.via === via);
    assert.ok(entry, `${via} ran`);
    assert.deepEqual(entry.keys, [key], `${via} held ${key}`);
    assert.equal(entry.dbToken, entry.token, `${via}: the database shows this call's grant as the holder`);
    assert.ok(entry.inTransaction, `${via} wrote inside the fenced transaction`);
  };

  it('locks when called from another service and via this', async () => {
    await app.get(Payments).pay(1);
    await app.get(Ledger).creditViaThis(2);
    check('other-service', 'acct:1');
    check('this', 'acct:2');
    const held = await locks.acquire('acct:1');
    try {
      await assert.rejects(app.get(Payments).pay(1), LockTimeoutError);
      await assert.rejects(app.get(Ledger).creditViaThis(1), LockTimeoutError);
    } finally {
      await held.release();
    }
    const rows = await db.query<{ via: string }[]>(`SELECT via FROM visits WHERE via IN ('other-service', 'this') ORDER BY id`);
    assert.deepEqual(
      rows.map((r) => r.via),
      ['other-service', 'this'],
    );
  });

  it('locks controller handlers over HTTP, with the route decorator on either side', async () => {
    const server = app.getHttpServer();
    assert.deepEqual((await request(server).get('/acct/7').expect(200)).body, { key: 'acct:7' });
    assert.deepEqual((await request(server).post('/acct/8').expect(201)).body, { key: 'acct:8' });
    check('http-get', 'acct:7');
    check('http-post', 'acct:8');
    const held = await locks.acquire(['acct:7', 'acct:8']);
    try {
      await request(server).get('/acct/7').expect(409);
      await request(server).post('/acct/8').expect(409);
    } finally {
      await held.release();
    }
    await request(server).get('/acct/7').expect(200);
  });

  it('locks @Cron jobs, with @Cron on either side, and keeps their registration', async () => {
    const registry = app.get(SchedulerRegistry);
    assert.ok(registry.getCronJob('lock-below'), '@Cron below the lock decorator registered');
    assert.ok(registry.getCronJob('lock-above'), '@Cron above the lock decorator registered');
    await eventually(() => seen.some((s) => s.via === 'cron-below') && seen.some((s) => s.via === 'cron-above'), 5000, 'both crons to fire');
    check('cron-below', 'cron:below');
    check('cron-above', 'cron:above');
    registry.getCronJob('lock-below').stop();
    registry.getCronJob('lock-above').stop();
  });
});

describe('bootstrap pool check', () => {
  it('warns when the DataSource pool cannot carry a REQUIRES_NEW call', async () => {
    const db = await TestDatabase.create();
    const logger = new CapturingLogger();
    try {
      for (const [extra, warned] of [
        [{ connectionLimit: 1 }, true],
        [{}, false],
      ] as const) {
        logger.warnings.length = 0;
        @Module({ imports: [typeOrmRoot(db.settings, extra), DbLockModule.forRoot()] })
        class SmallPoolModule {}
        const app = await NestFactory.createApplicationContext(SmallPoolModule, { logger });
        await app.init();
        await app.close();
        const warning = logger.warnings.find((w) => w.includes("transaction 'requires-new'"));
        assert.equal(Boolean(warning), warned, JSON.stringify(logger.warnings));
        if (warned) assert.match(warning!, /pool of 1 connection/);
      }
    } finally {
      await db.drop();
    }
  });
});
