#!/usr/bin/env node
// A throw-away 3-node MariaDB Galera cluster on 127.0.0.1, for tests and probes. No Docker: three
// mariadbd processes with their own datadir, socket, pid file and ports under one base directory.
//
//   node scripts/cluster/galera.mjs start            # (re)create and start the 3 nodes, wait until synced
//   node scripts/cluster/galera.mjs stop [--clean]   # stop every node (and rsync SST helpers); --clean removes the base dir
//   node scripts/cluster/galera.mjs kill-node N      # kill -9 node N (1..3)
//   node scripts/cluster/galera.mjs start-node N     # restart node N and wait until it is synced again
//   node scripts/cluster/galera.mjs status | urls
//
// Base dir: $DBLOCK_GALERA_DIR, else ${TMPDIR:-/tmp}/dblock-galera.
// Node n (1..3): client port 4305+n, Galera group communication 14557+10n, IST +1, SST (rsync) +2.
// Root connects over TCP 127.0.0.1 with an empty password. A database `test` is created.
// Started as root, the nodes run as the `mysql` user (see prepareBaseDir); galera-4 and rsync are
// installed with apt-get when missing. Measured behaviour of this cluster: docs/notes/galera-probes.md.
//
// Also an ES module for tests: startCluster(), stopCluster({clean}), killNode(n), restartNode(n)
// (= startNode(n)), stopNode(n), nodeUrls(database?), nodeUrl(n), nodeStatus(n), nodePid(n), waitSynced().
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';

export const NODES = [1, 2, 3];
const MARIADBD = '/usr/sbin/mariadbd';
const PROVIDER = '/usr/lib/galera/libgalera_smm.so';

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

function checkNode(n) {
  if (!NODES.includes(n)) throw new Error(`node must be 1, 2 or 3, got ${n}`);
}

function paths(n) {
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

const log = (msg) => process.stderr.write(`[galera] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- prerequisites

function ensurePackages() {
  const missing = [];
  if (!existsSync(PROVIDER)) missing.push('galera-4');
  if (spawnSync('sh', ['-c', 'command -v rsync'], { stdio: 'ignore' }).status !== 0) missing.push('rsync');
  if (missing.length > 0) {
    if (process.getuid?.() !== 0) throw new Error(`missing ${missing.join(', ')}: run apt-get install -y ${missing.join(' ')} as root`);
    log(`installing ${missing.join(' ')} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    let r = spawnSync('apt-get', ['install', '-y', ...missing], { stdio: 'inherit', env });
    if (r.status !== 0) {
      spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
      r = spawnSync('apt-get', ['install', '-y', ...missing], { stdio: 'inherit', env });
    }
    if (r.status !== 0) throw new Error(`apt-get install -y ${missing.join(' ')} failed`);
  }
  for (const bin of [MARIADBD, '/usr/bin/mariadb-install-db', '/usr/bin/wsrep_sst_rsync']) {
    if (!existsSync(bin)) throw new Error(`${bin} not found: the mariadb-server package is required`);
  }
}

function portFree(port) {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

// ---------------------------------------------------------------- processes

/** Processes started from our base dir: mariadbd (--defaults-file=<base>/nodeN/my.cnf) and the rsync SST daemons/scripts. */
function ourProcesses() {
  const base = baseDir() + '/';
  const skip = new Set([process.pid, process.ppid]);
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || skip.has(Number(entry))) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean);
    } catch {
      continue;
    }
    if (argv.length === 0) continue;
    let exe = argv[0];
    try {
      exe = readlinkSync(`/proc/${entry}/exe`);
    } catch {
      /* zombie or gone */
    }
    const ours = argv.some((a) => a.startsWith(base) || a.includes(`=${base}`));
    const kind = /mariadbd|mysqld|rsync|wsrep_sst|sh$|bash$/.test(exe + ' ' + argv.slice(0, 2).join(' '));
    if (ours && kind) found.push({ pid: Number(entry), cmd: argv.join(' ').slice(0, 160) });
  }
  return found;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat); // a zombie is dead
  } catch {
    return false;
  }
}

export function nodePid(n) {
  try {
    const pid = Number(readFileSync(paths(n).pid, 'utf8').trim());
    return pid > 0 && alive(pid) ? pid : null;
  } catch {
    return null;
  }
}

async function waitGone(pids, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pids.every((p) => !alive(p))) return true;
    await sleep(50);
  }
  return pids.every((p) => !alive(p));
}

function spawnNode(n, extraArgs = []) {
  const p = paths(n);
  mkdirSync(p.data, { recursive: true });
  mkdirSync(p.tmp, { recursive: true });
  const out = openSync(p.out, 'a');
  const child = spawn(MARIADBD, [`--defaults-file=${p.cnf}`, ...userArgs(), ...extraArgs], {
    detached: true,
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  child.unref();
  // Written now (mariadbd writes its pid-file only after SST and engine start) so stop() finds a node stuck in SST.
  writeFileSync(p.pid, `${child.pid}\n`);
  return child.pid;
}

/**
 * Started as root, the nodes run as the `mysql` user, as a packaged server does. Not cosmetic: with
 * mariadbd running as root, the joiner's rsync daemon (started by the SST script) drops to uid nobody
 * and cannot write the root-owned datadir ("mkdir ... Permission denied", SST fails with error 255).
 * Started as another user, the nodes run as that user.
 */
const isRoot = process.getuid?.() === 0;
const RUN_AS = isRoot ? 'mysql' : null;
const userArgs = () => (RUN_AS ? [`--user=${RUN_AS}`] : []);

function prepareBaseDir() {
  const base = baseDir();
  mkdirSync(base, { recursive: true });
  if (!RUN_AS) return;
  if (spawnSync('id', ['-u', RUN_AS], { stdio: 'ignore' }).status !== 0) throw new Error(`user ${RUN_AS} does not exist (is mariadb-server installed?)`);
  const chown = spawnSync('chown', ['-R', `${RUN_AS}:`, base], { encoding: 'utf8' });
  if (chown.status !== 0) throw new Error(`chown -R ${RUN_AS} ${base} failed: ${chown.stderr}`);
  const probe = spawnSync('runuser', ['-u', RUN_AS, '--', 'test', '-w', base], { stdio: 'ignore' });
  if (probe.status !== 0) {
    throw new Error(`${base} is not writable by user ${RUN_AS} (a parent directory is not traversable?): set DBLOCK_GALERA_DIR, e.g. /tmp/dblock-galera`);
  }
}

function writeCnf(n) {
  const p = paths(n);
  const ports = nodePorts(n);
  const members = NODES.map((m) => `127.0.0.1:${nodePorts(m).gcomm}`).join(',');
  const cnf = `# generated by scripts/cluster/galera.mjs
[mysqld]
datadir=${p.data}
tmpdir=${p.tmp}
socket=${p.socket}
pid-file=${p.serverPid}
log-error=${p.err}
port=${ports.client}
bind-address=127.0.0.1
skip-name-resolve
${RUN_AS ? `user=${RUN_AS}\n` : ''}character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
performance_schema=OFF
max_connections=300

wsrep_on=ON
wsrep_provider=${PROVIDER}
wsrep_cluster_name=dblock-galera
wsrep_cluster_address=gcomm://${members}
wsrep_node_name=node${n}
wsrep_node_address=127.0.0.1:${ports.gcomm}
wsrep_node_incoming_address=127.0.0.1:${ports.client}
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:${ports.sst}
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:${ports.gcomm};ist.recv_addr=127.0.0.1:${ports.ist};gcache.size=64M"
`;
  writeFileSync(p.cnf, cnf);
}

// ---------------------------------------------------------------- status

async function socketQuery(n, sql, timeoutMs = 2000) {
  const conn = await mysql.createConnection({ socketPath: paths(n).socket, user: 'root', connectTimeout: timeoutMs });
  try {
    const [rows] = await conn.query({ sql, timeout: timeoutMs });
    return rows;
  } finally {
    conn.destroy();
  }
}

/** wsrep_* status of node n as an object, or null when the node does not answer. */
export async function nodeStatus(n) {
  try {
    const rows = await socketQuery(n, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready','wsrep_cluster_size','wsrep_local_state_comment','wsrep_cluster_status','wsrep_connected')");
    return Object.fromEntries(rows.map((r) => [r.Variable_name, r.Value]));
  } catch {
    return null;
  }
}

function synced(s, size) {
  return s && s.wsrep_ready === 'ON' && Number(s.wsrep_cluster_size) === size && s.wsrep_local_state_comment === 'Synced';
}

function tail(file, lines = 25) {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Waits until every node in `nodes` is Synced, ready and sees a cluster of `size`; throws with the logs' tails on timeout. */
export async function waitSynced(nodes = NODES, { size = NODES.length, timeoutMs = 90_000, trace = null } = {}) {
  const start = Date.now();
  const end = start + timeoutMs;
  let last = {};
  while (Date.now() < end) {
    for (const n of nodes) {
      if (!nodePid(n)) throw failure(`node ${n} exited`, nodes, last);
    }
    last = Object.fromEntries(await Promise.all(nodes.map(async (n) => [n, await nodeStatus(n)])));
    // trace: {node, phases}: when node first answered in each wsrep state (ms since the wait began)
    if (trace) {
      const state = last[trace.node]?.wsrep_local_state_comment ?? 'not answering';
      trace.phases[state] ??= Date.now() - start;
    }
    if (nodes.every((n) => synced(last[n], size))) return last;
    await sleep(200);
  }
  throw failure(`timed out after ${timeoutMs} ms waiting for cluster_size=${size}, wsrep_ready=ON, Synced`, nodes, last);
}

function failure(msg, nodes, last) {
  const parts = [msg];
  for (const n of nodes) {
    parts.push(`--- node ${n} status: ${JSON.stringify(last[n] ?? null)}; tail of ${paths(n).err}:\n${tail(paths(n).err)}`);
  }
  return new Error(parts.join('\n'));
}

// ---------------------------------------------------------------- lifecycle

/** Stops every node of the base dir (graceful, then SIGKILL) and any SST helper left behind; clean=true removes the base dir. */
export async function stopCluster({ clean = false, graceMs = 20_000 } = {}) {
  const nodes = NODES.filter((n) => nodePid(n));
  await Promise.all(nodes.map((n) => stopNode(n, { graceMs })));
  const rest = ourProcesses();
  for (const p of rest) {
    log(`killing leftover pid ${p.pid}: ${p.cmd}`);
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await waitGone(rest.map((p) => p.pid), 5000);
  if (clean) rmSync(baseDir(), { recursive: true, force: true });
}

/** Graceful shutdown of one node (SIGTERM = shutdown), SIGKILL after graceMs. */
export async function stopNode(n, { graceMs = 20_000 } = {}) {
  const pid = nodePid(n);
  if (!pid) return;
  log(`stopping node ${n} (pid ${pid})`);
  process.kill(pid, 'SIGCONT'); // in case a test froze it with SIGSTOP
  process.kill(pid, 'SIGTERM');
  if (!(await waitGone([pid], graceMs))) {
    log(`node ${n} did not stop in ${graceMs} ms: SIGKILL`);
    process.kill(pid, 'SIGKILL');
    await waitGone([pid], 5000);
  }
}

/** kill -9 node n; resolves once the process is gone. Returns the pid killed. */
export async function killNode(n) {
  const pid = nodePid(n);
  if (!pid) throw new Error(`node ${n} is not running`);
  process.kill(pid, 'SIGKILL');
  await waitGone([pid], 5000);
  return pid;
}

/** Position saved in grastate.dat ({uuid, seqno}); seqno is -1 after a crash. */
function grastate(n) {
  try {
    const text = readFileSync(join(paths(n).data, 'grastate.dat'), 'utf8');
    return { uuid: /uuid:\s*(\S+)/.exec(text)?.[1], seqno: Number(/seqno:\s*(-?\d+)/.exec(text)?.[1]) };
  } catch {
    return null;
  }
}

/** After a crash: mariadbd --wsrep-recover reads the last committed position from InnoDB (what galera_recovery does under systemd). */
function recoverPosition(n) {
  const p = paths(n);
  const logFile = join(p.dir, 'wsrep-recover.log');
  rmSync(logFile, { force: true });
  // SIGKILL at the bound: a recovery run has been seen to print its position and then never exit (a
  // SIGTERM it ignores would keep spawnSync, and the whole test process with it, blocked for good).
  const r = spawnSync(MARIADBD, [`--defaults-file=${p.cnf}`, ...userArgs(), '--wsrep-recover', `--log-error=${logFile}`], {
    stdio: 'ignore',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
  const m = /WSREP: Recovered position:\s*(\S+:-?\d+)/.exec(tail(logFile, 200));
  // The position printed is what recovery is for: a run killed after printing it still answered.
  if (!m || (r.status !== 0 && r.signal !== 'SIGKILL')) throw new Error(`wsrep-recover of node ${n} failed:\n${tail(logFile)}`);
  return m[1];
}

/**
 * Starts node n as a joiner of the running cluster and waits until it is synced. After a kill -9 the
 * position is first recovered from InnoDB (as galera_recovery does), so the node can rejoin by IST.
 * Returns {ms, recoverMs, transfer: 'SST' | 'IST of N writesets' | 'IST' | 'none', phases: {state: ms}}.
 */
export async function startNode(n, { recover = true, timeoutMs = 90_000 } = {}) {
  checkNode(n);
  if (nodePid(n)) throw new Error(`node ${n} is already running (pid ${nodePid(n)})`);
  const t0 = Date.now();
  const args = [];
  const state = grastate(n);
  let recoverMs = 0;
  if (recover && state && state.seqno === -1 && existsSync(join(paths(n).data, 'ibdata1'))) {
    const pos = recoverPosition(n);
    recoverMs = Date.now() - t0;
    log(`node ${n}: recovered position ${pos} (${recoverMs} ms)`);
    args.push(`--wsrep_start_position=${pos}`);
  }
  const errBefore = existsSync(paths(n).err) ? readFileSync(paths(n).err, 'utf8').length : 0;
  spawnNode(n, args);
  const others = NODES.filter((m) => m !== n && nodePid(m));
  const trace = { node: n, phases: {} };
  const t1 = Date.now();
  await waitSynced([n, ...others], { size: others.length + 1, timeoutMs, trace });
  // ms since the start of startNode at which the node first answered in each state (Joiner, Joined, Synced...)
  const phases = Object.fromEntries(Object.entries(trace.phases).map(([k, v]) => [k, v + (t1 - t0)]));
  const errLog = readFileSync(paths(n).err, 'utf8').slice(errBefore);
  // the rsync SST script runs on every join; it logs "rsync SST completed" or "rsync IST completed"
  const ist = /Receiving IST: (\d+) writesets/.exec(errLog);
  const transfer = /rsync SST completed on joiner/.test(errLog) ? 'SST' : ist ? `IST of ${ist[1]} writesets` : /rsync IST completed/.test(errLog) ? 'IST' : 'none';
  return { ms: Date.now() - t0, recoverMs, transfer, phases };
}

export const restartNode = startNode;

/**
 * Removes any previous run, initialises node 1, bootstraps it, joins nodes 2 and 3 by rsync SST one
 * after the other, waits until the three are Synced with cluster_size=3. Returns nodeUrls().
 * (Copying node 1's datadir to the joiners instead is not faster: the configuration changes since the
 * copy still need an IST, which runs through the same SST script and its sleeps.)
 */
export async function startCluster({ timeoutMs = 90_000 } = {}) {
  ensurePackages();
  await stopCluster({ clean: true });
  try {
    return await bootstrap(timeoutMs);
  } catch (err) {
    // leave no process behind; keep the datadirs and logs for inspection
    await stopCluster({ graceMs: 5000 }).catch(() => {});
    throw err;
  }
}

async function bootstrap(timeoutMs) {
  const t0 = Date.now();
  for (const n of NODES) {
    for (const [name, port] of Object.entries(nodePorts(n))) {
      if (!(await portFree(port))) throw new Error(`port ${port} (node ${n} ${name}) is in use by another process`);
    }
  }
  for (const n of NODES) {
    mkdirSync(paths(n).data, { recursive: true });
    mkdirSync(paths(n).tmp, { recursive: true });
    writeCnf(n);
  }
  prepareBaseDir();
  const p1 = paths(1);
  const init = spawnSync(
    'mariadb-install-db',
    ['--no-defaults', `--datadir=${p1.data}`, ...userArgs(), '--auth-root-authentication-method=normal', '--skip-test-db', '--innodb-log-file-size=32M'],
    { encoding: 'utf8' },
  );
  if (init.status !== 0) throw new Error(`mariadb-install-db failed:\n${init.stdout}\n${init.stderr}`);
  log(`node 1 initialised (${Date.now() - t0} ms); bootstrapping`);
  spawnNode(1, ['--wsrep-new-cluster']);
  await waitSynced([1], { size: 1, timeoutMs });
  // install-db's 'normal' root is root@localhost (socket); TCP from 127.0.0.1 needs its own account (skip-name-resolve).
  await socketQuery(1, "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''");
  await socketQuery(1, "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION");
  await socketQuery(1, 'CREATE DATABASE IF NOT EXISTS test');
  // One joiner at a time: a donor serves one rsync SST at a time (starting both together is not faster).
  for (const n of [2, 3]) {
    const t = Date.now();
    spawnNode(n);
    await waitSynced(NODES.filter((m) => m <= n), { size: n, timeoutMs });
    log(`node ${n} joined (SST ${Date.now() - t} ms)`);
  }
  for (const n of NODES) {
    const conn = await mysql.createConnection({ host: '127.0.0.1', port: nodePorts(n).client, user: 'root', password: '' });
    await conn.end();
  }
  log(`cluster up in ${Date.now() - t0} ms: ${nodeUrls().join(' ')}`);
  return nodeUrls();
}

// ---------------------------------------------------------------- CLI

async function main(argv) {
  const [cmd, arg] = argv;
  switch (cmd) {
    case 'start':
      await startCluster();
      console.log(nodeUrls().join('\n'));
      break;
    case 'stop':
      await stopCluster({ clean: argv.includes('--clean') });
      log(`stopped${argv.includes('--clean') ? `; removed ${baseDir()}` : ''}`);
      break;
    case 'kill-node': {
      const pid = await killNode(Number(arg));
      log(`node ${arg}: pid ${pid} killed (SIGKILL)`);
      break;
    }
    case 'start-node':
    case 'restart-node': {
      const r = await startNode(Number(arg));
      log(`node ${arg} synced in ${r.ms} ms (${r.transfer}; first seen in state: ${JSON.stringify(r.phases)})`);
      break;
    }
    case 'status':
      for (const n of NODES) console.log(`node${n} pid=${nodePid(n) ?? '-'} ${nodeUrl(n)} ${JSON.stringify(await nodeStatus(n))}`);
      break;
    case 'urls':
      console.log(nodeUrls().join('\n'));
      break;
    default:
      console.error('usage: galera.mjs start | stop [--clean] | kill-node N | start-node N | status | urls');
      process.exit(2);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`[galera] ERROR: ${err.message}`);
    process.exit(1);
  });
}
