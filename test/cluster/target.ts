/**
 * The library under test and the framework it runs in, loaded from the same tree. By default the
 * build of this tree (build/lib); DBLOCK_CLUSTER_LIB points the suite at another build (an older
 * commit checked out elsewhere) to show the suite sees its violations.
 *
 * Nest and TypeORM must be the copies the library itself imports (an app has one copy: the
 * library's LockService is injected with the DataSource class of *its* typeorm), so they are
 * imported through a small module written beside the library, which resolves them from the
 * library's own node_modules.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type Lib = typeof import('../../lib/index.js');

export interface Framework {
  common: typeof import('@nestjs/common');
  core: typeof import('@nestjs/core');
  nestTypeorm: typeof import('@nestjs/typeorm');
  typeorm: typeof import('typeorm');
}

const SHIM = `// written by test/cluster/target.ts: Nest and TypeORM as the library beside it resolves them
import 'reflect-metadata';
export * as common from '@nestjs/common';
export * as core from '@nestjs/core';
export * as nestTypeorm from '@nestjs/typeorm';
export * as typeorm from 'typeorm';
`;

/** Path of the library entry under test (an ES module build's index.js). */
export function libEntry(): string {
  const fromEnv = process.env.DBLOCK_CLUSTER_LIB;
  if (fromEnv) return resolve(fromEnv);
  return fileURLToPath(new URL('../../lib/index.js', import.meta.url));
}

/** Writes the framework shim beside the library (idempotent); called by the parent before forking workers. */
export function prepareTarget(): string {
  const entry = libEntry();
  writeFileSync(join(dirname(entry), 'cluster-framework.generated.mjs'), SHIM);
  return entry;
}

export async function loadTarget(): Promise<{ lib: Lib; fw: Framework; entry: string }> {
  const entry = libEntry();
  const fw = (await import(pathToFileURL(join(dirname(entry), 'cluster-framework.generated.mjs')).href)) as Framework;
  const lib = (await import(pathToFileURL(entry).href)) as Lib;
  return { lib, fw, entry };
}

/** True when the library under test has the row-lock strategy (older builds do not). */
export function hasRowLock(lib: Lib): boolean {
  return 'strategy' in (lib.DB_LOCK_DEFAULTS as object);
}
