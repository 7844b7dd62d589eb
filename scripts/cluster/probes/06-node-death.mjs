// Probe 6: a node dies (kill -9) or hangs (SIGSTOP) while clients commit on every node.
// Two writer clients per node loop on autocommit INSERTs (5 ms pause) and log each commit's start, end and error.
// Measured: the longest commit and the longest gap without any commit on the survivors, what the
// victim's clients see, what a new connection to the victim returns, and how long the rejoin takes.
//
//   node scripts/cluster/probes/06-node-death.mjs [victim=3]
import { connect, describe, tally, sleep, percentile, mysql } from './common.mjs';
import { killNode, nodePid, nodePorts, startNode, waitSynced } from '../galera.mjs';

const VICTIM = Number(process.argv[2] ?? 3);
const SURVIVORS = [1, 2, 3].filter((n) => n !== VICTIM);
const now = () => performance.now();
const PAUSE_MS = 5; // between two commits of one writer: a steady load, not a saturated 2-core box

const setup = await connect(SURVIVORS[0]);
await setup.query('DROP TABLE IF EXISTS p6');
await setup.query('CREATE TABLE p6 (id BIGINT AUTO_INCREMENT PRIMARY KEY, node INT, client INT)');
await setup.end();

/** Writers on `nodes`; returns {commits: [{node, start, end, err}], stop()}. */
function startWriters(nodes, perNode = 2) {
  const commits = [];
  let running = true;
  const loops = [];
  for (const node of nodes) {
    for (let c = 0; c < perNode; c++) {
      loops.push(
        (async () => {
          let conn = null;
          while (running) {
            try {
              conn ??= await connect(node, { connectTimeout: 2000 });
            } catch (err) {
              commits.push({ node, start: now(), end: now(), err: `new connection: ${describe(err)}` });
              await sleep(200);
              continue;
            }
            const start = now();
            try {
              await conn.query('INSERT INTO p6 (node, client) VALUES (?, ?)', [node, c]);
              commits.push({ node, start, end: now(), err: null });
              await sleep(PAUSE_MS);
            } catch (err) {
              commits.push({ node, start, end: now(), err: `${describe(err)}${err.fatal ? ' (fatal)' : ''}` });
              if (err.fatal) {
                conn.destroy();
                conn = null;
              }
              await sleep(100);
            }
          }
          conn?.destroy();
        })(),
      );
    }
  }
  return {
    commits,
    async stop() {
      running = false;
      await Promise.race([Promise.all(loops), sleep(5000)]);
    },
  };
}

/** Survivor commits around t0: longest commit, longest gap between two completed commits. */
function stall(commits, t0, t1) {
  const ok = commits.filter((c) => SURVIVORS.includes(c.node) && !c.err && c.end >= t0 - 1000 && c.start <= t1);
  const ends = ok.map((c) => c.end).sort((a, b) => a - b);
  let gap = 0;
  let gapFrom = 0;
  for (let i = 1; i < ends.length; i++) {
    if (ends[i] - ends[i - 1] > gap) [gap, gapFrom] = [ends[i] - ends[i - 1], ends[i - 1]];
  }
  const longest = ok.reduce((m, c) => (c.end - c.start > m.end - m.start ? c : m), { start: 0, end: 0 });
  const before = commits.filter((c) => SURVIVORS.includes(c.node) && !c.err && c.end < t0).map((c) => c.end - c.start);
  const errors = {};
  for (const c of commits) if (SURVIVORS.includes(c.node) && c.err && c.end >= t0) tally(errors, c.err);
  return {
    baselineCommitMs: { p50: +percentile(before, 50).toFixed(1), max: +Math.max(...before).toFixed(1), count: before.length },
    longestCommitMs: Math.round(longest.end - longest.start),
    longestCommitStartedMsAfterEvent: Math.round(longest.start - t0),
    longestGapWithoutCommitMs: Math.round(gap),
    gapStartedMsAfterEvent: Math.round(gapFrom - t0),
    survivorCommitsInWindow: ok.filter((c) => c.end >= t0).length,
    survivorErrors: errors,
  };
}

function victimView(commits, t0) {
  const seen = {};
  for (const c of commits) if (c.node === VICTIM && c.end >= t0 && c.err) tally(seen, `${c.err} (first at +${Math.round(commits.find((d) => d.node === VICTIM && d.err === c.err && d.end >= t0).end - t0)} ms)`);
  return seen;
}

async function clusterSizeWatcher(node) {
  const conn = await connect(node);
  const changes = [];
  let running = true;
  let last = null;
  const loop = (async () => {
    while (running) {
      const [[row]] = await conn.query("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'");
      if (row.Value !== last) changes.push({ at: now(), size: Number(row.Value) });
      last = row.Value;
      await sleep(50);
    }
  })();
  return {
    changes,
    async stop() {
      running = false;
      await loop;
      await conn.end();
    },
  };
}

async function newConnection(node) {
  const t = now();
  try {
    const c = await mysql.createConnection({ host: '127.0.0.1', port: nodePorts(node).client, user: 'root', connectTimeout: 3000 });
    await c.query('SELECT 1');
    await c.end();
    return `OK (${Math.round(now() - t)} ms)`;
  } catch (err) {
    return `${err.code} ${describe(err)} (after ${Math.round(now() - t)} ms)`;
  }
}

const report = {};

// --- A. kill -9
{
  const writers = startWriters([1, 2, 3]);
  const watcher = await clusterSizeWatcher(SURVIVORS[0]);
  await sleep(3000);
  const t0 = now();
  await killNode(VICTIM);
  await sleep(20_000);
  const sizeChange = watcher.changes.find((c) => c.at > t0 && c.size < 3);
  const connAttempt = await newConnection(VICTIM);
  const t1 = now();
  const rejoin = await startNode(VICTIM); // recovers the position (--wsrep-recover) then rejoins
  const t2 = now();
  const duringRejoin = stall(writers.commits, t1, t2);
  await writers.stop();
  await watcher.stop();
  report.kill9 = {
    survivors: stall(writers.commits, t0, t1),
    clusterSizeDroppedMsAfterKill: sizeChange ? Math.round(sizeChange.at - t0) : null,
    victimClients: victimView(writers.commits, t0),
    newConnectionToDeadNode: connAttempt,
    rejoinWithRecoveredPosition: { ...rejoin, commitsDuringRejoin: duringRejoin },
  };
}

// --- B. kill -9 again, restart without recovering the position first
{
  const writers = startWriters(SURVIVORS);
  await sleep(1000);
  await killNode(VICTIM);
  await sleep(8000);
  const t1 = now();
  const rejoin = await startNode(VICTIM, { recover: false });
  const t2 = now();
  await writers.stop();
  report.kill9RestartWithoutRecovery = { ...rejoin, commitsDuringRejoin: stall(writers.commits, t1, t2) };
}

// --- C. SIGSTOP (a hung node / lost network: sockets stay open), 25 s, then SIGCONT
{
  const writers = startWriters([1, 2, 3]);
  const watcher = await clusterSizeWatcher(SURVIVORS[0]);
  await sleep(3000);
  const pid = nodePid(VICTIM);
  const t0 = now();
  process.kill(pid, 'SIGSTOP');
  await sleep(3000);
  const connAttempt = await newConnection(VICTIM);
  await sleep(22_000);
  const t1 = now();
  process.kill(pid, 'SIGCONT');
  let back = null;
  try {
    await waitSynced([1, 2, 3], { timeoutMs: 60_000 });
    back = `${Math.round(now() - t1)} ms after SIGCONT, without restart`;
  } catch (err) {
    back = `not back 60 s after SIGCONT (${err.message.split('\n')[0]}); restarting it`;
    if (nodePid(VICTIM)) await killNode(VICTIM);
    await startNode(VICTIM);
  }
  await writers.stop();
  await watcher.stop();
  const sizeChange = watcher.changes.find((c) => c.at > t0 && c.size < 3);
  report.sigstop = {
    survivors: stall(writers.commits, t0, t1),
    clusterSizeDroppedMsAfterStop: sizeChange ? Math.round(sizeChange.at - t0) : null,
    victimClients: victimView(writers.commits, t0),
    victimClientsStillWaitingAtSigcont: 'see longest victim commit below',
    longestVictimCommitMs: Math.round(Math.max(...writers.commits.filter((c) => c.node === VICTIM && c.end >= t0).map((c) => c.end - c.start), 0)),
    newConnectionToStoppedNode: connAttempt,
    rejoin: back,
  };
}

const c = await connect(SURVIVORS[0]);
const [[settings]] = await c.query(
  "SELECT @@wsrep_provider_options LIKE '%evs.suspect_timeout = PT5S%' AS suspect5s, @@wsrep_provider_options LIKE '%evs.inactive_timeout = PT15S%' AS inactive15s",
);
await c.end();
console.log(JSON.stringify({ victim: VICTIM, defaults: settings, ...report }, null, 2));
