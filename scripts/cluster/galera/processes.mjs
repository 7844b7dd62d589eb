// The cluster's processes: finding them under the base dir, spawning a node, waiting for pids to go.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { MARIADBD, baseDir, paths, sleep, userArgs } from './layout.mjs';

/** Processes started from our base dir: mariadbd (--defaults-file=<base>/nodeN/my.cnf) and the rsync SST daemons/scripts. */
export function ourProcesses() {
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

export function alive(pid) {
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

export async function waitGone(pids, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pids.every((p) => !alive(p))) return true;
    await sleep(50);
  }
  return pids.every((p) => !alive(p));
}

export function spawnNode(n, extraArgs = []) {
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
