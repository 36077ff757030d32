#!/usr/bin/env bash
# The issue's long job (#16), once per lab: a fortnight-long pre-training run on 96 nodes (768 GPUs) at
# 15 s, its GPU series on nodes of its own (lj001…), then the recording rules of `slurmlens rules`
# replayed over its fortnight by vmalert (as a site backfills history it seeded before running vmalert),
# and its record written into sakura's slurmdbd (job 9000001: /jobs/9000001?cluster=sakura).
# `slurmlens-dev bench long-report` reports on it. Not part of the test run: the tests use a small
# synthetic long job. Needs `lab/lab.sh up` and a built `slurmlens-dev`.
#
#   bash e2e/seed-longjob.sh     (LONGJOB_DAYS, LONGJOB_NODES shrink it; LONGJOB_METRICS=gpu_util,tensor_active
#                                 writes only those: this 2-core lab imports ~0.3 M samples/s, 62 M per metric)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
DEV_BIN=${E2E_SLURMLENS_DEV_BIN:-$ROOT/target/debug/slurmlens-dev}
[[ -x $DEV_BIN ]] || cargo build -q -p slurmlens-tools --bin slurmlens-dev
DAYS=${LONGJOB_DAYS:-14}
NODES=${LONGJOB_NODES:-96}
METRICS=${LONGJOB_METRICS:-}

# Seeded unless most of its GPUs reported within the last day.
series=$(curl -s "$SLURMLENS_VM_URL/api/v1/query" --data-urlencode 'query=count(last_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"lj[0-9]+"}[1d]))' \
  | sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)"\].*/\1/p' || true)
if [[ ${series:-0} -lt $((NODES * 8 * 9 / 10)) ]]; then
  "$DEV_BIN" demo seed-long-job --days "$DAYS" --nodes "$NODES" ${METRICS:+--metrics "$METRICS"}
fi
# The rules over the job's window (the hour after it too: replaying is idempotent).
from=$(date -u -d "@$(( $(date +%s) - (DAYS + 1) * 86400 ))" +%Y-%m-%dT%H:00:00Z)
to=$(date -u +%Y-%m-%dT%H:%M:00Z)
started=$(date +%s)
bash lab/lab.sh replay-rules "$from" "$to"
echo "recording rules replayed over $from … $to in $(( $(date +%s) - started )) s"
# Its record in sakura's slurmdbd (job 9000001 and its steps), so the demo's pages show it.
"$DEV_BIN" demo record-long-job --cluster sakura --days "$DAYS" --nodes "$NODES"
