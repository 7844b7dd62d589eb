// Where each node of the throw-away Galera cluster lives: ports, URLs, files, the user it runs as.
import { join, resolve } from 'node:path';

export const NODES = [1, 2, 3];
export const MARIADBD = '/usr/sbin/mariadbd';
export const PROVIDER = '/usr/lib/galera/libgalera_smm.so';

export function baseDir() {
  return resolve(process.env.DBLOCK_GALERA_DIR || join(process.env.TMPDIR || '/tmp', 'dblock-galera'));
}

export function nodePorts(n) {
  checkNode(n);
  const gcomm = 14557 + 10 * n;
  return { client: 4305 + n, gcomm, ist: gcomm + 1, sst: gcomm + 2 };
}

export function nodeUrl(n, database = '') {
  return `mysql://root@127.0.0.1:${nodePorts(n).client}${database ? `/${database}` : ''}`;
}

/** ['mysql://root@127.0.0.1:4306', ...]; pass 'test' to get URLs with a database. */
export function nodeUrls(database = '') {
  return NODES.map((n) => nodeUrl(n, database));
}

export function checkNode(n) {
  if (!NODES.includes(n)) throw new Error(`node must be 1, 2 or 3, got ${n}`);
}

export function paths(n) {
  const dir = join(baseDir(), `node${n}`);
  return {
    dir,
    data: join(dir, 'data'),
    tmp: join(dir, 'tmp'),
    cnf: join(dir, 'my.cnf'),
    socket: join(dir, 'mariadbd.sock'),
    pid: join(dir, 'node.pid'), // written by us at spawn time
    serverPid: join(dir, 'mariadbd.pid'), // written by mariadbd (pid-file)
    err: join(dir, 'error.log'),
    out: join(dir, 'stdout.log'),
  };
}

export const log = (msg) => process.stderr.write(`[galera] ${msg}\n`);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Started as root, the nodes run as the `mysql` user, as a packaged server does. Not cosmetic: with
 * mariadbd running as root, the joiner's rsync daemon (started by the SST script) drops to uid nobody
 * and cannot write the root-owned datadir ("mkdir ... Permission denied", SST fails with error 255).
 * Started as another user, the nodes run as that user.
 */
const isRoot = process.getuid?.() === 0;
export const RUN_AS = isRoot ? 'mysql' : null;
export const userArgs = () => (RUN_AS ? [`--user=${RUN_AS}`] : []);
