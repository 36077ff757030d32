#!/usr/bin/env bash
# Runs the product on a fresh machine: the lab (real Slurm + MariaDB + VictoriaMetrics), a live job
# mix on cluster `lab`, 30 days of generated history for the 100-node cluster `sakura`, and the
# slurmlens server at the printed URL; `slurmlens-dev demo live` keeps sakura's jobs and telemetry going
# while it runs. Re-running keeps what exists (SLURMLENS_DEMO_FRESH=1 regenerates).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
LISTEN=${SLURMLENS_DEMO_LISTEN:-127.0.0.1:8080}

bash lab/lab.sh up
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"

# One cargo invocation for both binaries: one feature resolution, so the server library is built once.
cargo build --release -p slurmlens-server -p slurmlens-tools
BIN=$ROOT/target/release/slurmlens
# The dev tooling (demo data), kept out of the server's binary.
DEV_BIN=$ROOT/target/release/slurmlens-dev
# The Slurm plugins: the report link at submission and atop job output, and each job's GPU indices.
bash lab/install-plugins.sh release
# The web pages' browser bundle (Debian's rustc-web for wasm32; the first run sets the tools up).
bash web/setup-wasm.sh
bash web/build.sh

jobs_in() {
  mariadb --defaults-file="$LAB_MYCNF" -N -e "SELECT COUNT(*) FROM slurm_acct_db.${1}_job_table"
}

if [[ ${SLURMLENS_DEMO_FRESH:-0} == 1 || $(jobs_in sakura) -lt 1000 ]]; then
  "$DEV_BIN" demo seed-history --cluster sakura
fi
# Our own schema (GPU records, archived reports), then 48 h of dcgm-exporter/rdma_exporter series that
# agree with sakura's jobs (and the GPU records its plugin would have sent), with the ping mesh and burst
# series of the racks the server shows (same topology file), and node_exporter, ipmi_exporter and Lustre
# series, unless most of the 800 GPUs reported within the hour.
"$BIN" migrate
series=$(curl -s "$SLURMLENS_VM_URL/api/v1/query" --data-urlencode 'query=count(last_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu.*"}[1h]))' \
  | sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)"\].*/\1/p' || true)
if [[ ${SLURMLENS_DEMO_FRESH:-0} == 1 || ${series:-0} -lt 700 ]]; then
  SLURMLENS_CLUSTERS=lab,sakura SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" \
    "$DEV_BIN" demo seed-telemetry --cluster sakura --hours "${SLURMLENS_DEMO_HOURS:-48}"
fi
# The fortnight-long 768-GPU pre-training run (its own nodes), with the recording rules replayed over it:
# on request only (SLURMLENS_DEMO_LONGJOB=1), as it takes this 2-core machine 15 to 50 minutes to write; its
# record is job 9000001 of sakura (on nodes of its own, lj001…, which sakura's node list does not hold).
if [[ ${SLURMLENS_DEMO_LONGJOB:-0} == 1 ]]; then
  E2E_SLURMLENS_DEV_BIN=$DEV_BIN bash e2e/seed-longjob.sh
fi
if [[ $(jobs_in lab) -lt 1 ]]; then
  bash lab/submit-mix.sh "$LAB/mix.tsv"
fi

echo
echo "slurmlens demo: http://$LISTEN/?cluster=sakura  (Gantt; /grid, /jobs, /jobs/<id>; API under /api/v1; clusters: lab, sakura)"
# The lab's Slurm plugins post GPU records with this cluster secret (written when they were installed).
SECRET=$(cat "$LAB/etc/slurmlens-plugin.secret")
# sakura stays alive next to the server: every 30 s its jobs end, start and arrive (its history's scheduler
# continued) and every seeded series gets its samples up to now; started again, it catches up (at most an
# hour of samples). It stops with the server.
SLURMLENS_CLUSTERS=lab,sakura SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" "$DEV_BIN" demo live --cluster sakura &
LIVE_PID=$!
trap 'kill "$LIVE_PID" 2>/dev/null || true; wait "$LIVE_PID" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The archiver makes the digests of the jobs the telemetry covers (48 h), not of 30 days that would say
# "no data". Logs come from the lab's VictoriaLogs, where rsyslog ships the lab nodes' logs (syslog names
# the node `hostname`): the lab's jobs show their real lines; sakura's nodes have none.
SLURMLENS_VICTORIALOGS__URL=$LAB_VLOGS_URL SLURMLENS_VICTORIALOGS__NODE_FIELD=hostname \
SLURMLENS_INGEST__SECRETS__LAB=$SECRET SLURMLENS_REPORT__BACKFILL_DAYS=$(( (${SLURMLENS_DEMO_HOURS:-48} + 23) / 24 )) \
SLURMLENS_CLUSTERS=lab,sakura SLURMLENS_LISTEN=$LISTEN SLURMLENS_ACCESS__ANONYMOUS=staff \
  SLURMLENS_SITE_ROOT="$ROOT/target/site" SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" "$BIN" serve
