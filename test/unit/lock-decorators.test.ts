import 'reflect-metadata';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Get, Post, SetMetadata } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import {
  DbLockError,
  DbLockOptionsError,
  DistributedLock,
  getLockMetadata,
  InvalidLockKeyError,
  LockServiceRegistry,
  ReadLock,
  WriteLock,
} from '../../lib/index.js';
import { fakeLockService } from '../support/fake-lock-service.js';

// What @nestjs/event-emitter's @OnEvent and @nestjs/microservices' @EventPattern do (neither
// package is installed here): Reflect metadata on descriptor.value, the same mechanism as SetMetadata.
const OnEvent = (event: string) => SetMetadata('EVENT_LISTENER_METADATA', [{ event }]);
const EventPattern = (pattern: string) => SetMetadata('microservices:pattern', [pattern]);

describe('lock decorators', () => {
  afterEach(() => LockServiceRegistry.reset());

  it('keeps Nest metadata in both decorator orders, and this, name and length', async () => {
    class Handlers {
      factor = 2;
      @Get('a') @WriteLock('a') async lockBelow(x: number, _y?: number): Promise<number> {
        return x * this.factor;
      }
      @WriteLock('b') @Get('b') async lockAbove(x: number): Promise<number> {
        return x * this.factor;
      }
      @Post('c') @Cron('0 0 3 * * *') @OnEvent('e') @EventPattern('p') @ReadLock('c') async allBelow(): Promise<void> {}
      @ReadLock('d') @Post('d') @Cron('0 0 4 * * *') @OnEvent('f') @EventPattern('q') async allAbove(): Promise<void> {}
    }
    const proto = Handlers.prototype;
    assert.equal(Reflect.getMetadata('path', proto.lockBelow), 'a');
    assert.equal(Reflect.getMetadata('path', proto.lockAbove), 'b');
    for (const [method, path, cron, event, pattern] of [
      [proto.allBelow, 'c', '0 0 3 * * *', 'e', 'p'],
      [proto.allAbove, 'd', '0 0 4 * * *', 'f', 'q'],
    ] as const) {
      assert.equal(Reflect.getMetadata('path', method), path);
      assert.equal(Reflect.getMetadata('method', method), 1 /* RequestMethod.POST */);
      assert.equal((Reflect.getMetadata('SCHEDULE_CRON_OPTIONS', method) as { cronTime: string }).cronTime, cron);
      assert.equal(Reflect.getMetadata('SCHEDULER_TYPE', method), 1 /* SchedulerType.CRON */);
      assert.deepEqual(Reflect.getMetadata('EVENT_LISTENER_METADATA', method), [{ event }]);
      assert.deepEqual(Reflect.getMetadata('microservices:pattern', method), [pattern]);
      assert.ok(getLockMetadata(method), 'the method is marked as locked');
    }
    assert.equal(proto.lockBelow.name, 'lockBelow');
    assert.equal(proto.lockBelow.length, 2);
    assert.equal(proto.lockAbove.length, 1);
    assert.equal(proto.lockAbove.name, 'lockAbove');
    const calls = fakeLockService();
    const handlers = new Handlers();
    assert.equal(await handlers.lockBelow(21), 42);
    assert.equal(await handlers.lockAbove(5), 10);
    assert.deepEqual(
      calls.map((c) => c.keys),
      ['a', 'b'],
    );
  });

  it('derives keys from templates, arrays, functions, or ClassName.methodName', async () => {
    class Orders {
      @WriteLock('order:{0.id}') async pay(_order: { id: string }): Promise<void> {}
      @DistributedLock(['loan:{0}', 'customer:{1}'], 'read', 500) async both(_loan: number, _customer: string): Promise<void> {}
      @DistributedLock({ key: (id: number, region: string) => [`a:${region}:${id}`, `b:${id}`], leaseMs: 1000, onLocked: 'skip' })
      async fn(_id: number, _region: string): Promise<void> {}
      @DistributedLock() async nightly(): Promise<void> {}
      @ReadLock(undefined, { transaction: 'none' }) static async report(): Promise<void> {}
      @WriteLock('user:{0}', { name: 'users' }) async user(_id: number): Promise<void> {}
    }
    const calls = fakeLockService();
    const orders = new Orders();
    await orders.pay({ id: 'A7' });
    await orders.both(3, 'c9');
    await orders.fn(5, 'eu');
    await orders.nightly();
    await Orders.report();
    await orders.user(4);
    assert.deepEqual(calls, [
      // Metrics name each lock by its declaration (template(s), else ClassName.methodName), never by the filled-in key.
      { keys: 'order:A7', options: { mode: 'write', name: 'order:{0.id}' } },
      { keys: ['loan:3', 'customer:c9'], options: { mode: 'read', timeoutMs: 500, name: 'loan:{0},customer:{1}' } },
      { keys: ['a:eu:5', 'b:5'], options: { leaseMs: 1000, onLocked: 'skip', name: 'Orders.fn' } },
      { keys: 'Orders.nightly', options: { name: 'Orders.nightly' } },
      { keys: 'Orders.report', options: { transaction: 'none', mode: 'read', name: 'Orders.report' } },
      { keys: 'user:4', options: { mode: 'write', name: 'users' } },
    ]);
    // A template value that would build a wrong key: typed error, LockService never called.
    await assert.rejects(orders.pay({ id: undefined as unknown as string }), InvalidLockKeyError);
    assert.equal(calls.length, 6);
  });

  it('rejects bad declarations when the class loads', () => {
    const declare = (build: () => unknown): unknown => build;
    const cases: [string, () => void, RegExp | (new (...a: never[]) => Error) | ((e: unknown) => boolean)][] = [
      [
        'two lock decorators',
        () => {
          class Twice {
            @ReadLock('x') @WriteLock('x') async m(): Promise<void> {}
          }
          declare(() => Twice);
        },
        /two lock decorators \(@WriteLock and @ReadLock\)/,
      ],
      [
        'bad template',
        () => {
          class BadTemplate {
            @WriteLock('order:{0.id') async m(_o: unknown): Promise<void> {}
          }
          declare(() => BadTemplate);
        },
        DbLockOptionsError,
      ],
      [
        'placeholder past the parameters',
        () => {
          class PastParams {
            @WriteLock('order:{1}') async m(_o: unknown): Promise<void> {}
          }
          declare(() => PastParams);
        },
        /names argument 1, but the method declares 1 parameter/,
      ],
      [
        'bad options',
        () => {
          class BadOptions {
            @DistributedLock({ key: 'k', mode: 'exclusive' as 'write', timeoutMs: -1, onLocked: 'wait' as 'throw', colour: 1 } as never)
            async m(): Promise<void> {}
          }
          declare(() => BadOptions);
        },
        (e: unknown) =>
          e instanceof DbLockOptionsError &&
          e.problems.length === 4 &&
          ['mode', 'timeoutMs', 'onLocked', "'colour'"].every((word) => e.message.includes(word)),
      ],
      [
        'sync method',
        () => {
          class Sync {
            // @ts-expect-error the lock is held until a promise settles: sync methods are refused in the types too
            @WriteLock('s') m(): number {
              return 1;
            }
          }
          declare(() => Sync);
        },
        /must be async/,
      ],
      [
        'mode in @ReadLock options',
        () => {
          class ModeTwice {
            @ReadLock('k', { mode: 'write' } as never) async m(): Promise<void> {}
          }
          declare(() => ModeTwice);
        },
        /sets mode 'read'/,
      ],
    ];
    for (const [what, build, expected] of cases) assert.throws(build, expected as RegExp, what);
    assert.throws(() => {
      class OnGetter {
        // @ts-expect-error a getter is not a method
        @WriteLock('g') get value(): Promise<number> {
          return Promise.resolve(1);
        }
      }
      declare(() => OnGetter);
    }, DbLockError);
  });

  it('enforces in the types that a skipping method may resolve undefined', () => {
    class Jobs {
      @WriteLock('j1', { onLocked: 'skip' }) async maybe(): Promise<number | undefined> {
        return 1;
      }
      @WriteLock('j2', { onLocked: 'skip' }) async nothing(): Promise<void> {}
      // @ts-expect-error onLocked 'skip' resolves undefined: Promise<number> would lie
      @WriteLock('j3', { onLocked: 'skip' }) async always(): Promise<number> {
        return 1;
      }
      // @ts-expect-error the key function's parameters must match the method's
      @WriteLock((id: string) => `k:${id}`) async typed(_id: number): Promise<void> {}
    }
    assert.ok(Jobs);
  });
});
