import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoopReport, LoopSpec, ParentMessage, WorkerMessage, WorkerSettings } from './types.js';

const WORKER_FILE = fileURLToPath(new URL('./worker.js', import.meta.url));

/** The parent's handle on one worker process (see worker.ts). */
export class ClusterWorker {
  private waiting: { type: WorkerMessage['type']; resolve(message: WorkerMessage): void; reject(error: Error): void }[] = [];
  private exited = false;

  private constructor(
    readonly settings: WorkerSettings,
    private readonly child: ChildProcess,
  ) {
    child.on('message', (message: WorkerMessage) => {
      const index = this.waiting.findIndex((w) => w.type === message.type);
      if (index < 0) return;
      const [entry] = this.waiting.splice(index, 1);
      entry!.resolve(message);
    });
    child.on('exit', (code) => {
      this.exited = true;
      for (const entry of this.waiting.splice(0)) entry.reject(new Error(`worker ${settings.name} exited (code ${code})`));
    });
  }

  static async start(settings: WorkerSettings): Promise<ClusterWorker> {
    const child = fork(WORKER_FILE, [], {
      env: { ...process.env, DBLOCK_CLUSTER_WORKER: JSON.stringify(settings) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new ClusterWorker(settings, child);
    const first = await Promise.race([worker.next('ready'), worker.next('fatal')]);
    if (first.type === 'fatal') throw new Error(`worker ${settings.name} failed to start: ${first.error}`);
    return worker;
  }

  run(loops: LoopSpec[], phase: string): Promise<LoopReport> {
    const report = this.next('report').then((m) => (m as Extract<WorkerMessage, { type: 'report' }>).report);
    this.send({ type: 'run', loops, phase });
    return report;
  }

  stop(): void {
    this.send({ type: 'stop' });
  }

  async janitor(): Promise<unknown> {
    const answer = this.next('janitor');
    this.send({ type: 'janitor' });
    const message = (await answer) as Extract<WorkerMessage, { type: 'janitor' }>;
    if (message.error) throw new Error(message.error);
    return message.result;
  }

  /** Graceful close (the app releases what it holds), SIGKILL after `graceMs`. */
  async close(graceMs = 30_000): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.send({ type: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }

  private send(message: ParentMessage): void {
    if (!this.exited) this.child.send(message);
  }

  private next(type: WorkerMessage['type']): Promise<WorkerMessage> {
    return new Promise((resolve, reject) => this.waiting.push({ type, resolve, reject }));
  }
}
