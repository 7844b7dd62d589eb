// Minimal types for node-redlock 4.x (CommonJS, ships none), only what the benchmark uses.
declare module 'redlock' {
  import type { EventEmitter } from 'node:events';
  namespace Redlock {
    interface Options {
      driftFactor?: number;
      retryCount?: number;
      retryDelay?: number;
      retryJitter?: number;
    }
    interface Lock {
      readonly resource: string;
      readonly value: string;
      readonly expiration: number;
      readonly attempts: number;
      unlock(): Promise<void>;
      extend(ttl: number): Promise<Lock>;
    }
  }
  class Redlock extends EventEmitter {
    constructor(clients: unknown[], options?: Redlock.Options);
    lock(resource: string | string[], ttl: number): Promise<Redlock.Lock>;
    quit(): Promise<void>;
    static LockError: new (...args: unknown[]) => Error;
  }
  export = Redlock;
}
