import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { WorkerConfig } from './lock-worker.js';

const WORKER_FILE = fileURLToPath(new URL('./lock-worker.js', import.meta.url));

export interface WorkerOptions {
  /** Extra node flags, e.g. ['--import', clockSkewUrl]. */
  execArgv?: string[];
  env?: Record<string, string>;
}

/** Error thrown in a worker, rebuilt in the parent with the worker's name and message. */
export class WorkerError extends Error {
  constructor(
    readonly remoteName: string,
    message: string,
    readonly remoteStack?: string,
  ) {
    super(`${remoteName}: ${message}`);
    this.name = remoteName;
  }
}

/** A child Node process running a Nest app with DbLockModule (see lock-worker.ts). */
export class LockWorker {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
  private readonly listeners = new Map<number, (event: string, data: unknown) => void>();
  exited = false;

  private constructor(readonly child: ChildProcess) {
    child.on(
      'message',
      (message: {
        type: string;
        id: number;
        ok?: boolean;
        result?: unknown;
        error?: { name: string; message: string; stack?: string };
        event?: string;
        data?: unknown;
      }) => {
        if (message.type === 'event') this.listeners.get(message.id)?.(message.event!, message.data);
        if (message.type !== 'result') return;
        const entry = this.pending.get(message.id);
        this.pending.delete(message.id);
        this.listeners.delete(message.id);
        if (!entry) return;
        if (message.ok) entry.resolve(message.result);
        else entry.reject(new WorkerError(message.error!.name, message.error!.message, message.error!.stack));
      },
    );
    child.on('exit', () => {
      this.exited = true;
      for (const entry of this.pending.values()) entry.reject(new Error(`worker ${child.pid} exited`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Starts a worker and waits until its app is initialised. */
  static async start(config: WorkerConfig, options: WorkerOptions = {}): Promise<LockWorker> {
    const child = fork(WORKER_FILE, [], {
      // WORKER_EXEC_ARGV: node flags for every worker in development probes (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p").
      execArgv: options.execArgv ?? process.env.WORKER_EXEC_ARGV?.split(' ').filter(Boolean) ?? [],
      env: { ...process.env, ...options.env, DB_LOCK_WORKER: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (message: { type: string; error?: string }): void => {
        if (message.type === 'ready') {
          child.off('message', onMessage);
          resolve();
        } else if (message.type === 'fatal') {
          // A worker that failed to start must not outlive the test: it holds the runner's stdout open.
          child.kill('SIGKILL');
          reject(new Error(`worker failed to start: ${message.error}`));
        }
      };
      child.on('message', onMessage);
      child.once('exit', (code) => reject(new Error(`worker exited during start (code ${code})`)));
    });
    return new LockWorker(child);
  }

  /** All started, or none left running: the ones that did start are closed when another fails. */
  static async startMany(count: number, config: WorkerConfig, options?: WorkerOptions): Promise<LockWorker[]> {
    const settled = await Promise.allSettled(Array.from({ length: count }, () => LockWorker.start(config, options)));
    const started = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (!failed) return started;
    await Promise.all(started.map((w) => w.close()));
    throw failed.reason;
  }

  /**
   * Runs exported function `fn` of scenario module `moduleUrl` (a file URL, e.g.
   * `new URL('./scenarios/x.js', import.meta.url).href`) in the worker; `onEvent` receives its emits.
   */
  run<T = unknown>(moduleUrl: string, fn: string, args?: unknown, onEvent?: (event: string, data: unknown) => void): Promise<T> {
    const id = this.nextId++;
    if (onEvent) this.listeners.set(id, onEvent);
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ type: 'run', id, module: moduleUrl, fn, args });
    });
  }

  /** Sends a signal (SIGKILL, SIGSTOP, SIGCONT...). */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Closes the app gracefully and waits for the process to exit (kills it after `graceMs`). */
  async close(graceMs = 10_000): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ type: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** SIGKILLs and waits for the exit. */
  async kill(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    await exited;
  }
}
