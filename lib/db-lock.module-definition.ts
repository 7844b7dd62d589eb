import { ConfigurableModuleBuilder, type ConfigurableModuleAsyncOptions, type DynamicModule } from '@nestjs/common';
import { DB_LOCK_MODULE_OPTIONS, DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
import type { DbLockModuleOptions } from './db-lock.options.js';

/**
 * Registration-time settings: they decide providers and tokens, so they are static fields of
 * `forRoot()` / `forRootAsync()`, never something an async factory returns later.
 */
export interface DbLockRegistration {
  /** Name of the TypeORM DataSource holding the lock tables. Default 'default'. */
  dataSourceName?: string;
  /**
   * Provide LockService to every module of the app, without importing DbLockModule there.
   * Default true: one `forRoot()` in the root module, and any feature module can inject it.
   */
  isGlobal?: boolean;
}

/** Name of the method a `useClass` / `useExisting` options factory implements. */
export const DB_LOCK_OPTIONS_FACTORY_METHOD = 'createDbLockOptions';

/** A class that gives DbLockModule its options (`forRootAsync({ useClass })` / `{ useExisting }`). */
export interface DbLockOptionsFactory {
  /** Returns the module options (called once, at bootstrap). */
  createDbLockOptions(): DbLockModuleOptions | Promise<DbLockModuleOptions>;
}

/**
 * `DbLockModule.forRootAsync()` arguments, Nest's usual async-module form: `useFactory` (with
 * typed `inject` and `imports`), `useClass` or `useExisting` (a DbLockOptionsFactory), plus the
 * static registration fields (`isGlobal`, `dataSourceName`).
 */
export interface DbLockModuleAsyncOptions
  extends ConfigurableModuleAsyncOptions<DbLockModuleOptions, typeof DB_LOCK_OPTIONS_FACTORY_METHOD>, DbLockRegistration {}

/** The registration with its defaults applied. */
export interface ResolvedRegistration {
  readonly dataSourceName: string;
  readonly isGlobal: boolean;
}

/**
 * The module class Nest's ConfigurableModuleBuilder generates (forRoot, forRootAsync with its
 * three forms, options under DB_LOCK_MODULE_OPTIONS); `complete` adds the lock providers.
 */
export function dbLockModuleBase(complete: (definition: DynamicModule, registration: ResolvedRegistration) => DynamicModule) {
  return new ConfigurableModuleBuilder<DbLockModuleOptions>({ optionsInjectionToken: DB_LOCK_MODULE_OPTIONS })
    .setClassMethodName('forRoot')
    .setFactoryMethodName(DB_LOCK_OPTIONS_FACTORY_METHOD)
    .setExtras<DbLockRegistration>({ dataSourceName: DEFAULT_DATA_SOURCE_NAME, isGlobal: true }, (definition, extras) =>
      // An extra given as `undefined` overrides the default in the builder's merge: default it again.
      complete(definition, { dataSourceName: extras.dataSourceName ?? DEFAULT_DATA_SOURCE_NAME, isGlobal: extras.isGlobal ?? true }),
    )
    .build().ConfigurableModuleClass;
}
