/**
 * Child-process side of multi-process tests. Boots a real Nest app with DbLockModule on the
 * database named in DB_LOCK_WORKER (JSON: { settings, options, mysqlExtra }), then runs
 * scenario functions on request: { id, module, fn, args } -> { id, ok, result | error }.
 * A scenario is any exported async function taking a WorkerContext; test files keep their own
 * scenarios next to them (see scenarios/), so no central registry is needed.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from './lock-app.js';
import type { LockService, DbLockModuleOptions } from '../../lib/index.js';
import type { ConnectionSettings } from './test-database.js';

export interface WorkerConfig {
  settings: ConnectionSettings;
  options?: DbLockModuleOptions;
  mysqlExtra?: Record<string, unknown>;
  /** Optional module (file URL) whose `imports`/`providers` exports are added to the app. */
  appModule?: string;
}

export interface WorkerContext<A = unknown> {
  readonly locks: LockService;
  readonly app: INestApplicationContext;
  readonly settings: ConnectionSettings;
  readonly args: A;
  /** Sends an event to the parent while the scenario runs (e.g. "acquired"). */
  readonly emit: (event: string, data?: unknown) => void;
}

interface RunMessage {
  id: number;
  type: 'run';
  module: string;
  fn: string;
  args: unknown;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.DB_LOCK_WORKER ?? '{}') as WorkerConfig;
  let imports: unknown[] = [];
  let providers: unknown[] = [];
  if (config.appModule) {
    const mod = (await import(config.appModule)) as { imports?: unknown[]; providers?: unknown[] };
    imports = mod.imports ?? [];
    providers = mod.providers ?? [];
  }
  const { app, locks } = await createLockApp(config.settings, config.options ?? {}, {
    mysqlExtra: config.mysqlExtra,
    imports: imports as never,
    providers: providers as never,
  });
  const send = (message: unknown): void => {
    process.send?.(message);
  };
  // The parent is gone (a test timed out and its process was killed): a worker left running would
  // keep its connections and renewals alive for the rest of the run.
  process.on('disconnect', () => process.exit(1));
  process.on('message', (message: RunMessage | { type: 'close' }) => {
    if (message.type === 'close') {
      void app.close().then(() => process.exit(0));
      return;
    }
    void (async () => {
      try {
        const mod = (await import(message.module)) as Record<string, (ctx: WorkerContext) => Promise<unknown>>;
        const fn = mod[message.fn];
        if (typeof fn !== 'function') throw new Error(`No scenario ${message.fn} in ${message.module}`);
        const emit = (event: string, data?: unknown): void => send({ type: 'event', id: message.id, event, data });
        const result = await fn({ locks, app, settings: config.settings, args: message.args, emit });
        send({ type: 'result', id: message.id, ok: true, result });
      } catch (error) {
        const e = error as Error;
        send({ type: 'result', id: message.id, ok: false, error: { name: e?.name, message: e?.message, stack: e?.stack } });
      }
    })();
  });
  send({ type: 'ready', pid: process.pid });
}

main().catch((error: unknown) => {
  process.send?.({ type: 'fatal', error: String((error as Error)?.stack ?? error) });
  process.exit(1);
});
