#!/usr/bin/env bash
# Cluster `sakura`'s demo data in the lab, made once per lab: 30 days of generated slurmdbd history, and
# 48 h of dcgm-exporter, rdma_exporter, ping-mesh, burst, node and Lustre series that agree with its jobs,
# with the faults they plant written to $LAB/sakura-planted.json (the verdict tests' ground truth).
# The lab's current VictoriaMetrics ($LAB_VM_CURRENT_URL) gets the same telemetry (written to both), so the
# tests' second pass (LAB_VM_UNDER_TEST=current) reads what the first does.
# The integration tests (digests, grid colours) and the browser tests read them. Needs `lab/lab.sh up` and
# built `slurmlens` and `slurmlens-dev` binaries.
#
#   bash e2e/seed-sakura.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
BIN=${E2E_SLURMLENS_BIN:-$ROOT/target/debug/slurmlens}
DEV_BIN=${E2E_SLURMLENS_DEV_BIN:-$ROOT/target/debug/slurmlens-dev}
[[ -x $BIN ]] || cargo build -q -p slurmlens-server --bin slurmlens
[[ -x $DEV_BIN ]] || cargo build -q -p slurmlens-tools --bin slurmlens-dev

jobs_in() { mariadb --defaults-file="$LAB_MYCNF" -N -e "SELECT COUNT(*) FROM slurm_acct_db.${1}_job_table"; }
if [[ $(jobs_in sakura) -lt 100000 ]]; then
  echo "generating sakura's 30-day history (once)"
  "$DEV_BIN" demo seed-history --cluster sakura
fi

# Seeded unless most of the 800 GPUs reported within the hour (a node that lost a GPU to XID 79 stays
# silent until its reboot) and the planted faults are on record.
sakura_gpus() {
  curl -s "$1/api/v1/query" --data-urlencode 'query=count(last_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu.*"}[1h]))' \
    | sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)"\].*/\1/p' || true
}
series=$(sakura_gpus "$SLURMLENS_VM_URL")
PLANTED=$LAB/sakura-planted.json
if [[ ${series:-0} -lt 700 || ! -s $PLANTED ]]; then
  echo "seeding sakura's telemetry (once)"
  # A seeding replaces the last: written over it, two seedings' counters would interleave (VictoriaMetrics
  # keeps both) and read as resets, i.e. rates past any link's speed. Sakura's own series go first: its
  # GPUs (Hostname), its nodes' and OSSes' exporters and its ping-mesh agents (instance).
  for vm in "$SLURMLENS_VM_URL" ${LAB_VM_CURRENT_URL:+"$LAB_VM_CURRENT_URL"}; do
    for match in '{Hostname=~"gpu[0-9]{3}"}' '{instance=~"gpu[0-9]{3}:[0-9]+|sakura-oss[0-9]+:[0-9]+|[A-Z][0-9]{2}-agent"}'; do
      curl -fsS "$vm/api/v1/admin/tsdb/delete_series" --data-urlencode "match[]=$match" \
        || { echo "could not clear sakura's earlier telemetry from $vm" >&2; exit 1; }
    done
  done
  SLURMLENS_CLUSTERS=sakura,lab SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" "$BIN" migrate >/dev/null
  SLURMLENS_CLUSTERS=sakura,lab SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" "$DEV_BIN" demo seed-telemetry --cluster sakura --hours 48 --planted "$PLANTED" \
    ${LAB_VM_CURRENT_URL:+--mirror "$LAB_VM_CURRENT_URL"} \
    || { echo "seeding failed; VictoriaMetrics' last words:" >&2; grep -v rollup_result_cache "$LAB/log/victoria-metrics.log" | tail -n 20 >&2; exit 1; }
fi

# A current VictoriaMetrics added to a lab seeded before it: every series of the Debian one, copied once
# as JSON lines (1.79's native export does not import into current releases: "cannot unmarshal native
# block"). Slow (313 M samples: 9 min on a busy 2-core machine); a fresh seed writes both instead (--mirror:
# 6 h of telemetry took 27.4 s into both against 24.9 s into one). Re-running merges identical
# samples (-dedup.minScrapeInterval=1ms).
if [[ -n ${LAB_VM_CURRENT_URL:-} && $(sakura_gpus "$LAB_VM_CURRENT_URL") -lt 700 ]]; then
  echo "copying VictoriaMetrics' series into $LAB_VM_CURRENT_VERSION (once)"
  started=$SECONDS
  # -T - streams the body (--data-binary @- would read all of it into memory first).
  curl -fsS "$SLURMLENS_VM_URL/api/v1/export" --data-urlencode 'match[]={__name__!=""}' \
    | curl -fsS -X POST -T - "$LAB_VM_CURRENT_URL/api/v1/import"
  curl -fsS "$LAB_VM_CURRENT_URL/internal/force_flush" >/dev/null
  echo "copied in $((SECONDS - started)) s: $(sakura_gpus "$LAB_VM_CURRENT_URL") of sakura's GPUs reported within the hour"
fi
