// Starting, stopping, killing and rejoining nodes, and bootstrapping the whole cluster.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { MARIADBD, NODES, baseDir, checkNode, log, nodePorts, nodeUrls, paths, userArgs } from './layout.mjs';
import { nodePid, ourProcesses, spawnNode, waitGone } from './processes.mjs';
import { ensurePackages, portFree, prepareBaseDir, writeCnf } from './setup.mjs';
import { socketQuery, tail, waitSynced } from './status.mjs';

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
  await waitGone(
    rest.map((p) => p.pid),
    5000,
  );
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
  const transfer = /rsync SST completed on joiner/.test(errLog)
    ? 'SST'
    : ist
      ? `IST of ${ist[1]} writesets`
      : /rsync IST completed/.test(errLog)
        ? 'IST'
        : 'none';
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
    [
      '--no-defaults',
      `--datadir=${p1.data}`,
      ...userArgs(),
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      '--innodb-log-file-size=32M',
    ],
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
    await waitSynced(
      NODES.filter((m) => m <= n),
      { size: n, timeoutMs },
    );
    log(`node ${n} joined (SST ${Date.now() - t} ms)`);
  }
  for (const n of NODES) {
    const conn = await mysql.createConnection({ host: '127.0.0.1', port: nodePorts(n).client, user: 'root', password: '' });
    await conn.end();
  }
  log(`cluster up in ${Date.now() - t0} ms: ${nodeUrls().join(' ')}`);
  return nodeUrls();
}
