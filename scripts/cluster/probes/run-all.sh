#!/usr/bin/env bash
# Starts a fresh cluster, runs every probe, writes each output to $OUT (default /tmp/galera-probes), stops the cluster.
#   bash scripts/cluster/probes/run-all.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/galera-probes}
mkdir -p "$OUT"
node scripts/cluster/galera.mjs start
trap 'node scripts/cluster/galera.mjs stop' EXIT
for probe in 01-bf-abort-batch 01-bf-abort-batch 02-cert-failure-commit 03-for-update-vs-fence 04-get-lock \
             05-max-statement-time 07-detection 08-sync-wait 09-batch-clock 06-node-death; do
  n=1; while [ -e "$OUT/$probe.$n.txt" ]; do n=$((n + 1)); done
  echo "== $probe (run $n)"
  node "scripts/cluster/probes/$probe.mjs" | tee "$OUT/$probe.$n.txt"
done
