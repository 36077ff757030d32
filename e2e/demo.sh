#!/usr/bin/env bash
# Runs the product on a fresh machine: the lab (real Slurm + MariaDB + VictoriaMetrics), a live job
# mix on cluster `lab`, 30 days of generated history for the 100-node cluster `sakura`, and the
# slurmlens server at the printed URL, its job reports already archived; `slurmlens-dev demo live` keeps
# sakura's jobs and telemetry going while it runs. Re-running keeps what exists (SLURMLENS_DEMO_FRESH=1
# regenerates). Each step prints its start time; a second run on the same machine takes seconds per step.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
LISTEN=${SLURMLENS_DEMO_LISTEN:-127.0.0.1:8080}
# The cargo profile of the demo's binaries (Cargo.toml: `demo` is optimised lightly, for build time).
PROFILE=${SLURMLENS_DEMO_PROFILE:-demo}
HOURS=${SLURMLENS_DEMO_HOURS:-48}
step() { printf '\n=== %s (%ss)\n' "$*" "$SECONDS"; }

step "lab up (the servers only the tests use stay off)"
bash lab/lab.sh up --demo
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"

# The web pages' browser bundle (Debian's rustc-web for wasm32; the first run sets its tools up) builds
# beside the server, on what the server's build leaves idle (niced: the server's build, its seeding and
# its archiver come first, the server serves the bundle once it is there).
WEB_LOG=$LAB/log/demo-web.log
step "web bundle: building in the background (log: $WEB_LOG)"
setsid nice -n 10 bash -c 'bash web/setup-wasm.sh && bash web/build.sh' >"$WEB_LOG" 2>&1 &
WEB_PID=$!
# Its own session: a failure before the wait stops the whole build.
trap 'kill -- -"$WEB_PID" 2>/dev/null || true' EXIT

step "cargo build --profile $PROFILE: slurmlens and slurmlens-dev"
# One cargo invocation for both binaries: one feature resolution, so the server library is built once.
cargo build --profile "$PROFILE" -p slurmlens-server -p slurmlens-tools
BIN=$ROOT/target/$PROFILE/slurmlens
# The dev tooling (demo data), kept out of the server's binary.
DEV_BIN=$ROOT/target/$PROFILE/slurmlens-dev

step "Slurm plugins: the report link at submission and atop job output, each job's GPU indices"
bash lab/install-plugins.sh "$PROFILE"

jobs_in() {
  mariadb --defaults-file="$LAB_MYCNF" -N -e "SELECT COUNT(*) FROM slurm_acct_db.${1}_job_table"
}

# The lab's real jobs run (and wait for their end states) while sakura is seeded.
MIX_PID=''
MIX_LOG=$LAB/log/demo-mix.log
if [[ $(jobs_in lab) -lt 1 ]]; then
  step "lab: a mix of real jobs on its 4 nodes, in the background (log: $MIX_LOG)"
  bash lab/submit-mix.sh "$LAB/mix.tsv" >"$MIX_LOG" 2>&1 &
  MIX_PID=$!
fi

step "sakura: 30 days of slurmdbd history (once per lab)"
if [[ ${SLURMLENS_DEMO_FRESH:-0} == 1 || $(jobs_in sakura) -lt 1000 ]]; then
  "$DEV_BIN" demo seed-history --cluster sakura
fi
# Our own schema (GPU records, archived reports), then 48 h of dcgm-exporter/rdma_exporter series that
# agree with sakura's jobs (and the GPU records its plugin would have sent), with the ping mesh and burst
# series of the racks the server shows (same topology file), and node_exporter, ipmi_exporter and Lustre
# series, unless most of the 800 GPUs reported within the hour.
"$BIN" migrate
step "sakura: ${HOURS} h of GPU, RDMA, node and Lustre series (unless most GPUs reported within the hour)"
series=$(curl -s "$SLURMLENS_VM_URL/api/v1/query" --data-urlencode 'query=count(last_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu.*"}[1h]))' \
  | sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)"\].*/\1/p' || true)
if [[ ${SLURMLENS_DEMO_FRESH:-0} == 1 || ${series:-0} -lt 700 ]]; then
  SLURMLENS_CLUSTERS=lab,sakura SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" \
    "$DEV_BIN" demo seed-telemetry --cluster sakura --hours "$HOURS"
fi
# The fortnight-long 768-GPU pre-training run (its own nodes), with the recording rules replayed over it:
# on request only (SLURMLENS_DEMO_LONGJOB=1), as it takes this 2-core machine 15 to 50 minutes to write; its
# record is job 9000001 of sakura (on nodes of its own, lj001…, which sakura's node list does not hold).
if [[ ${SLURMLENS_DEMO_LONGJOB:-0} == 1 ]]; then
  E2E_SLURMLENS_DEV_BIN=$DEV_BIN bash e2e/seed-longjob.sh
fi

# The lab's Slurm plugins post GPU records with this cluster secret (written when they were installed).
SECRET=$(cat "$LAB/etc/slurmlens-plugin.secret")
# The archiver makes the digests of the jobs the telemetry covers (48 h), not of 30 days that would say
# "no data": all of them before the URL is printed, at full speed (a site's server paces itself so as
# not to crowd its VictoriaMetrics; the demo's has it to itself). Logs come from the lab's VictoriaLogs,
# where rsyslog ships the lab nodes' logs (syslog names the node `hostname`): the lab's jobs show their
# real lines; sakura's nodes have none.
export SLURMLENS_VICTORIALOGS__URL=$LAB_VLOGS_URL SLURMLENS_VICTORIALOGS__NODE_FIELD=hostname \
  SLURMLENS_INGEST__SECRETS__LAB=$SECRET SLURMLENS_REPORT__BACKFILL_DAYS=$(((HOURS + 23) / 24)) \
  SLURMLENS_REPORT__BACKFILL_CONCURRENCY=4 SLURMLENS_REPORT__BACKFILL_PAUSE_MS=0 \
  SLURMLENS_CLUSTERS=lab,sakura SLURMLENS_LISTEN=$LISTEN SLURMLENS_ACCESS__ANONYMOUS=staff \
  SLURMLENS_SITE_ROOT="$ROOT/target/site" SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml"
SERVER_LOG=$LAB/log/demo-server.log
# Another server on the address (an earlier demo still running) would answer for this one.
if curl -s -o /dev/null --max-time 2 "http://$LISTEN/"; then
  echo "demo: something already answers on $LISTEN (an earlier demo?): stop it, or set SLURMLENS_DEMO_LISTEN" >&2
  exit 1
fi
step "slurmlens serve (log: $SERVER_LOG)"
"$BIN" serve >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
# sakura stays alive next to the server: every 30 s its jobs end, start and arrive (its history's scheduler
# continued) and every seeded series gets its samples up to now; started again, it catches up (at most an
# hour of samples). Both stop with this script.
"$DEV_BIN" demo live --cluster sakura &
LIVE_PID=$!
# (Each step `|| true`: under set -e a failed kill, of a bundle already built, would end the trap there.)
trap 'kill -- -"$WEB_PID" 2>/dev/null || true; kill -- -"${AGENT_PID:-0}" 2>/dev/null || true; bash lab/agent.sh stop || true
  kill "${PROGRESS_PID:-}" "$LIVE_PID" "$SERVER_PID" 2>/dev/null || true; wait "$LIVE_PID" "$SERVER_PID" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The server answers within seconds; its archiver's first round (every report of the last days) goes on
# in the background, and the job list says how far it is while it does. This script prints its progress.
metric() { curl -fsS --max-time 5 "http://$LISTEN/metrics" 2>/dev/null | awk -v name="$1" '$1 == name { print $2 }'; }
sql() { mariadb --defaults-file="$LAB_MYCNF" -N -e "$1" 2>/dev/null || echo '?'; }
round_ended() { local at; at=$(metric slurmlens_archive_last_round_timestamp_seconds); [[ -n $at && $at != 0 && $at != 0.0 ]]; }
server_runs() { kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$SERVER_LOG" >&2; echo "demo: the server stopped" >&2; exit 1; }; }
until server_runs && curl -fsS -o /dev/null --max-time 2 "http://$LISTEN/api/v1/health"; do sleep 1; done
ended=$(sql "SELECT COUNT(*) FROM slurm_acct_db.sakura_job_table
  WHERE time_end > UNIX_TIMESTAMP() - $(((HOURS + 23) / 24)) * 86400")
archived() { sql "SELECT COUNT(*) FROM slurmlens.job_reports WHERE cluster = 'sakura'"; }
(
  shown=''
  until round_ended; do
    progress="reports archived: $(archived) of sakura's $ended ended jobs"
    [[ $progress != "$shown" ]] && printf '  %s (%ss)\n' "$progress" "$SECONDS" && shown=$progress
    sleep 30
  done
  printf '  every report of the last %s h archived (%ss)\n' "$HOURS" "$SECONDS"
) &
PROGRESS_PID=$!

step "web bundle: waiting for it"
if ! wait "$WEB_PID"; then
  tail -30 "$WEB_LOG" >&2
  echo "demo: the web bundle did not build (log: $WEB_LOG)" >&2
  exit 1
fi
tail -1 "$WEB_LOG"
if [[ -n $MIX_PID ]] && kill -0 "$MIX_PID" 2>/dev/null; then
  echo "lab: its job mix is still running (log: $MIX_LOG); its jobs show as they start and end"
fi
# The node agent on the lab's nodes (lab/agent.sh) and a training job it watches: built and started
# once the URL is out (its eBPF part compiles libbpf), from a session of its own so the trap stops it.
AGENT_LOG=$LAB/log/demo-agent.log
setsid nice -n 10 bash -c "cargo build -q --profile '$PROFILE' -p slurmlens-agent &&
  bash lab/agent.sh start '$ROOT/target/$PROFILE/slurmlens-agent' 'http://$LISTEN'" >"$AGENT_LOG" 2>&1 &
AGENT_PID=$!
echo
echo "slurmlens demo: http://$LISTEN/?cluster=sakura  (Gantt; /grid, /jobs, /jobs/<id>; API under /api/v1; clusters: lab, sakura)"
echo "(ready in ${SECONDS}s; the server's log: $SERVER_LOG; Ctrl-C stops it)"
round_ended || echo "(its archiver is still making the reports of the last $HOURS h: the job list says how far, and so does this terminal)"
echo "(the node agent is being built for the lab's nodes, then a stand-in training job runs on cluster lab: $AGENT_LOG)"
wait "$SERVER_PID"
