/**
 * Doorbells (lease strategy, where the store has them): how a waiter in another process learns
 * of a release without polling, while no connection is held per held lock. A contended key gets a
 * bell: a session-scoped named lock. A waiting writer blocks on it and asks for the key in the
 * same round trip once the bell is its; whoever has the bell keeps it through its hold; its
 * release rings it (in the release's round trip), waking the next waiter first come first
 * served, whatever its process. Bells never decide who holds a key (the log rows do): a lost
 * bell costs speed only.
 */
export interface DoorbellStore {
  /** The bell's name for a key (scoped to the database, so two apps never share a bell). */
  nameOf(storedKey: string): string;
  /** The bell this process has for the key, held by a waiter or a holder. */
  current(storedKey: string): Bell | undefined;
  /**
   * A holder of this process rang the key's bell within the last second: others were queued on
   * it, so the key is contended and a new writer of this process waits on the bell at once.
   */
  rungLately(storedKey: string): boolean;
  /**
   * The bell to ask through: this process's own when a waiter has it, else a wait for it (at most a
   * second, never past `deadline`), sent with the grant. Undefined when the doorbell connections
   * are all in use (the caller then asks without one).
   */
  prepare(storedKey: string, deadline: number): Promise<Bell | BellWait | undefined>;
  /** The wait ended with the grant's round trip: the bell is ours, or undefined (its connection went back, or was closed if the wait's result is unknown). */
  settle(wait: BellWait, waitResult: unknown): Bell | undefined;
  close(): Promise<void>;
}

/** A wait for a bell, sent in one round trip with the grant. */
export interface BellWait {
  readonly kind: 'wait';
  /** How long the wait lasted on the server, in ms, from its result (0 if unknown). */
  waitedMs(waitResult: unknown): number;
  /** The round trip failed: the session is closed, which frees the bell if it had it. */
  cancel(): void;
}

/** A bell this process has: waiting callers ask through it, then its holder keeps it until release. */
export interface Bell {
  readonly kind: 'bell';
  readonly state: 'waiting' | 'holding' | 'rung';
  /** The bell now belongs to the holder of the key, until its release. */
  hold(): void;
  /** Frees the bell (the next waiter wakes) and its connection. Idempotent. */
  ring(): Promise<void>;
}
