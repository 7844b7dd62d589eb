import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** One running copy of the sample app, as a child process on its own port. */
export interface Instance {
  readonly name: string;
  readonly port: number;
  readonly baseUrl: string;
  readonly child: ChildProcess;
  /** Its last lines of output, shown if something goes wrong. */
  readonly output: string[];
  /** Resolves with the exit code (or signal) once the process is gone. */
  readonly exited: Promise<string>;
}

const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));
const KEEP_LINES = 40;

/** Starts `build/sample-app/main.js` on `port` against `databaseUrl`. */
export function startInstance(name: string, port: number, databaseUrl: string): Instance {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, PORT: String(port), DB_LOCK_SAMPLE_URL: databaseUrl, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) output.push(line);
    output.splice(0, Math.max(0, output.length - KEEP_LINES));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? `exit ${code}`)));
  return { name, port, baseUrl: `http://127.0.0.1:${port}`, child, output, exited };
}

/** Polls `GET /loans` until the instance answers 200; fails if it exits or `timeoutMs` passes. */
export async function waitUntilReady(instance: Instance, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let gone: string | undefined;
  void instance.exited.then((how) => (gone = how));
  while (performance.now() < deadline) {
    if (gone) throw new Error(`${instance.name} stopped while starting (${gone}):\n  ${instance.output.join('\n  ')}`);
    try {
      const response = await fetch(`${instance.baseUrl}/loans`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${instance.name} did not answer on port ${instance.port} within ${timeoutMs} ms:\n  ${instance.output.join('\n  ')}`);
}

/**
 * Stops instances the way an orchestrator does: SIGTERM (the app closes gracefully and releases
 * its locks), SIGKILL after `graceMs`. Resolves when every process is gone.
 */
export async function stopInstances(instances: readonly Instance[], graceMs = 10_000): Promise<void> {
  await Promise.all(
    instances.map(async (instance) => {
      if (instance.child.exitCode !== null || instance.child.signalCode !== null) return;
      instance.child.kill('SIGTERM');
      const timer = setTimeout(() => instance.child.kill('SIGKILL'), graceMs);
      await instance.exited;
      clearTimeout(timer);
    }),
  );
}

/**
 * Ctrl-C (or SIGTERM) while the demo runs: stop the instances, then exit 130, so no orphan
 * process keeps a port or a database connection. (The terminal also sends SIGINT to the
 * children; stopInstances then just waits for them.)
 */
export function stopOnInterrupt(instances: readonly Instance[]): { readonly interrupted: boolean } {
  const state = { interrupted: false };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      if (state.interrupted) return;
      state.interrupted = true;
      console.error(`\n${signal}: stopping the instances...`);
      void stopInstances(instances).finally(() => process.exit(130));
    });
  return state;
}
