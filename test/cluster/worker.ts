/**
 * One worker process of the cluster suite: a Nest app whose DataSource (and so the library's own
 * pool, which takes its settings from it) points at one Galera node. The parent tells it which
 * loops to run, when to stop, when to run the janitor and when to close.
 */
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defineSections } from './sections.js';
import { loadTarget } from './target.js';
import type { Belief, ParentMessage, WorkerMessage, WorkerSettings } from './types.js';
import { Workload } from './workload.js';

const settings = JSON.parse(process.env.DBLOCK_CLUSTER_WORKER ?? '{}') as WorkerSettings;
const send = (message: WorkerMessage): void => void process.send?.(message);

async function main(): Promise<void> {
  const { lib, fw, entry } = await loadTarget();
  const dataSourceOptions = {
    type: 'mysql' as const,
    host: '127.0.0.1',
    port: settings.port,
    username: 'root',
    password: '',
    database: settings.database,
    synchronize: false,
    logging: false,
    poolSize: 10,
    extra: { connectTimeout: 3_000 },
  };
  class ClusterWorkerModule {}
  fw.common.Module({
    imports: [
      fw.nestTypeorm.TypeOrmModule.forRoot(dataSourceOptions),
      lib.DbLockModule.forRoot({ leaseMs: settings.longLeaseMs, timeoutMs: settings.timeoutMs }),
    ],
  })(ClusterWorkerModule);
  const app = await fw.core.NestFactory.createApplicationContext(ClusterWorkerModule, { logger: ['error'] });
  await app.init();
  const locks = app.get(lib.LockService);
  const dataSource = app.get(fw.typeorm.DataSource);
  if (settings.unsafeBatch) await switchOffClusterPath(entry, locks);

  const beliefs: Belief[] = [];
  const sections = defineSections(lib, settings, locks, dataSource, beliefs);
  let workload: Workload | undefined;
  let running: Promise<void> | undefined;

  process.on('message', (message: ParentMessage) => {
    switch (message.type) {
      case 'run':
        beliefs.length = 0;
        workload = new Workload(lib, settings, sections, beliefs);
        running = workload.run(message.loops).then((report) => send({ type: 'report', report }));
        break;
      case 'stop':
        workload?.stop();
        break;
      case 'janitor':
        void locks.runJanitor().then(
          (result) => send({ type: 'janitor', result }),
          (error: unknown) => send({ type: 'janitor', result: undefined, error: String(error) }),
        );
        break;
      case 'close':
        void Promise.resolve(running)
          .then(() => app.close())
          .finally(() => process.exit(0));
        break;
    }
  });
  send({ type: 'ready' });
}

/**
 * Negative control: this process's lock log behaves as on a single server (every transaction one
 * multi-statement batch, its answer trusted, no read-back after COMMIT), as a build without the
 * cluster path would.
 */
async function switchOffClusterPath(entry: string, locks: object): Promise<void> {
  const service = (await import(pathToFileURL(join(dirname(entry), 'lock.service.js')).href)) as { RUNNING_PARTS?: WeakMap<object, { store: { log: object } }> };
  const parts = service.RUNNING_PARTS?.get(locks);
  if (!parts) throw new Error('unsafeBatch needs a build with RUNNING_PARTS (this tree)');
  Object.defineProperty(parts.store.log, 'clustered', { get: () => false });
}

main().catch((error: unknown) => {
  send({ type: 'fatal', error: String((error as Error)?.stack ?? error) });
  setTimeout(() => process.exit(1), 100);
});
