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
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODES, baseDir, log, nodeUrl, nodeUrls } from './galera/layout.mjs';
import { killNode, startCluster, startNode, stopCluster } from './galera/lifecycle.mjs';
import { nodePid } from './galera/processes.mjs';
import { nodeStatus } from './galera/status.mjs';

export { NODES, baseDir, nodePorts, nodeUrl, nodeUrls } from './galera/layout.mjs';
export { killNode, restartNode, startCluster, startNode, stopCluster, stopNode } from './galera/lifecycle.mjs';
export { nodePid } from './galera/processes.mjs';
export { nodeStatus, waitSynced } from './galera/status.mjs';

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
