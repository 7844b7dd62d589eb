import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { type DbLockModuleOptions, getLockServiceToken, type LockEvent, type LockHandle, LockService, LockServiceRegistry } from '../../lib/index.js';
import type { EntityManager } from 'typeorm';
import { DbLockTestingModule } from '../../lib/testing/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/** One side of a parity comparison: a LockService and the events it emitted. */
export interface Side {
  readonly name: 'database' | 'memory';
  readonly locks: LockService;
  readonly events: LockEvent[];
  close(): Promise<void>;
}

/** The database-backed service (lease, MariaDB) and the in-memory one, built with the same options. */
export async function bothSides(
  options: DbLockModuleOptions = {},
  memoryManager?: EntityManager,
): Promise<{ db: TestDatabase; sides: Side[]; closeAll(): Promise<void> }> {
  const db = await TestDatabase.create();
  const realEvents: LockEvent[] = [];
  const memEvents: LockEvent[] = [];
  const { app: realApp, locks: real } = await createLockApp(db.settings, { janitor: false, ...options, onEvent: (e) => realEvents.push(e) });
  @Module({
    imports: [DbLockTestingModule.forRoot({ ...options, manager: memoryManager, dataSourceName: 'memory', onEvent: (e) => memEvents.push(e) })],
  })
  class InMemoryApp {}
  const memApp: INestApplicationContext = await NestFactory.createApplicationContext(InMemoryApp, { logger: false });
  await memApp.init();
  const mem = memApp.get<LockService>(getLockServiceToken('memory'));
  let realClosed = false;
  let memClosed = false;
  const sides: Side[] = [
    { name: 'database', locks: real, events: realEvents, close: async () => void (realClosed || ((realClosed = true), await realApp.close())) },
    { name: 'memory', locks: mem, events: memEvents, close: async () => void (memClosed || ((memClosed = true), await memApp.close())) },
  ];
  return {
    db,
    sides,
    async closeAll() {
      for (const side of sides) await side.close().catch(() => undefined);
      LockServiceRegistry.reset();
      await db.drop();
    },
  };
}

/** What a caller sees of an error: its class, message and typed fields. */
export function errorView(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { notAnError: String(error) };
  const view: Record<string, unknown> = {
    name: error.name,
    ctor: error.constructor.name,
    message: error.message.replace(/waited \d+ ms/g, 'waited N ms'),
  };
  for (const field of ['key', 'keys', 'mode', 'reason', 'problems', 'limit', 'currentLimit', 'fencingToken', 'timeoutMs']) {
    if (field in error) view[field] = (error as unknown as Record<string, unknown>)[field];
  }
  return view;
}

/** Runs `fn` and reports its outcome as a comparable value. */
export async function outcome(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    const value = await fn();
    return { ok: value === undefined ? 'undefined' : value };
  } catch (error) {
    return { error: errorView(error) };
  }
}

/** An event without its timings and objects: type, keys, mode, token, error class. */
export function eventView(e: LockEvent): Record<string, unknown> {
  return {
    type: e.type,
    keys: e.keys,
    mode: e.mode,
    fencingToken: e.fencingToken,
    count: e.count,
    error: e.error === undefined ? undefined : (e.error as Error).constructor?.name,
  };
}

/** Paths where `a` and `b` differ, with both values: a short message for a failed comparison. */
export function differences(a: unknown, b: unknown, path = ''): string[] {
  if (Object.is(a, b)) return [];
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b))
    return [`${path || '.'}: memory ${JSON.stringify(a)} | database ${JSON.stringify(b)}`];
  const out: string[] = [];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) out.push(...differences((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`));
  return out;
}

/** What a caller sees of a handle, comparable across the two sides. */
export const handleView = (h: LockHandle | null) =>
  h === null ? null : { keys: h.keys, mode: h.mode, modes: h.modes, fencingTokens: h.fencingTokens, reentrant: h.reentrant, released: h.released };

/**
 * Registers both sides for the enclosing describe (built before its tests, closed after them) and
 * returns `parity(title, scenario)`: a test that runs the scenario on each side in turn and
 * compares what each answered and emitted.
 */
export function parityTests(): (title: string, scenario: (locks: LockService, side: Side) => Promise<unknown>) => void {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides();
  });
  after(async () => {
    await env?.closeAll();
  });
  return (title, scenario) =>
    it(title, async () => {
      const results: Record<string, unknown> = {};
      for (const side of env.sides) {
        const from = side.events.length;
        const value = await scenario(side.locks, side);
        results[side.name] = { value, events: side.events.slice(from).map(eventView) };
      }
      // Wording only: memory has no transaction to roll back.
      const text = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll(' and was rolled back', ''));
      results.memory = text(results.memory);
      results.database = text(results.database);
      assert.deepEqual(results.memory, results.database, differences(results.memory, results.database).join('\n'));
    });
}
