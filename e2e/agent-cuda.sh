#!/usr/bin/env bash
# The agent's uprobes on a real kernel, inside real Slurm jobs of the lab. There is no GPU here: the
# CUDA runtime and NCCL are stand-ins built from C with the real symbol names and signatures
# (agent/tests/standin/), in non-standard paths as a pip wheel puts them (one with a wheel's hashed
# name). Two jobs run at once on one node (an idle one), each a known number of calls with known sizes on its own GPU; the
# agent posts to a slurmlens server on the lab, and each job's records must be exactly its own calls,
# on the GPU Slurm gave it (scontrol's IDX), with none crossing between the jobs.
#
#   bash lab/lab.sh up && bash e2e/agent-cuda.sh
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
((EUID == 0)) || { echo "agent-cuda: needs root (BPF)" >&2; exit 1; }
AGENT=${AGENT_BIN:-$ROOT/target/debug/slurmlens-agent}
SERVER_BIN=${E2E_SLURMLENS_BIN:-$ROOT/target/debug/slurmlens}
[[ -n ${AGENT_BIN:-} ]] || cargo build -q -p slurmlens-agent
[[ -x $SERVER_BIN ]] || cargo build -q -p slurmlens-server --bin slurmlens

WORK=$LAB/jobs/agent-cuda.$$
mkdir -p "$WORK"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  [[ -n ${KEEP_WORK:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "agent-cuda: FAIL at line $LINENO: $BASH_COMMAND" >&2' ERR
fail() { echo "agent-cuda: FAIL: $*" >&2; for log in "$WORK"/*.log; do echo "--- $log" >&2; tail -20 "$log" >&2; done; exit 1; }
log() { printf '[agent-cuda %ss] %s\n' "$SECONDS" "$*"; }

# ---------------------------------------------------------------- stand-ins and the two programs ---
STANDIN=$ROOT/agent/tests/standin
A_LIB=$WORK/a/venv/lib/python3.11/site-packages/nvidia
B_LIB=$WORK/b/opt/vendor-cuda/lib64
mkdir -p "$A_LIB/cuda_runtime/lib" "$A_LIB/nccl/lib" "$B_LIB"
gcc -O1 -fPIC -shared -Wl,-soname,libcudart-d0da41ae.so.12 -o "$A_LIB/cuda_runtime/lib/libcudart-d0da41ae.so.12" "$STANDIN/cudart.c"
gcc -O1 -fPIC -shared -Wl,-soname,libnccl.so.2 -o "$A_LIB/nccl/lib/libnccl.so.2" "$STANDIN/nccl.c"
gcc -O1 -fPIC -shared -Wl,-soname,libcudart.so.12 -o "$B_LIB/libcudart.so.12" "$STANDIN/cudart.c"
gcc -O1 -fPIC -shared -Wl,-soname,libnccl.so.2 -o "$B_LIB/libnccl.so.2" "$STANDIN/nccl.c"
gcc -O1 -o "$WORK/a/trainer" "$STANDIN/trainer.c" "$A_LIB/cuda_runtime/lib/libcudart-d0da41ae.so.12" "$A_LIB/nccl/lib/libnccl.so.2" \
  -Wl,-rpath,"$A_LIB/cuda_runtime/lib:$A_LIB/nccl/lib"
gcc -O1 -o "$WORK/b/trainer" "$STANDIN/trainer.c" "$B_LIB/libcudart.so.12" "$B_LIB/libnccl.so.2" -Wl,-rpath,"$B_LIB"
chmod -R a+rX "$WORK"
# The jobs write their output here as alice and bob.
chmod 1777 "$WORK"

# ---------------------------------------------------------------- the server's database ---
[[ $SLURMLENS_DATABASE_URL =~ ^mysql://([^:]+):([^@]+)@([^:/]+):([0-9]+)/ ]] || fail "SLURMLENS_DATABASE_URL is not mysql://user:password@host:port/db"
DATABASE=slurmlens_test_agent
DB_USER=${BASH_REMATCH[1]} DB_PASSWORD=${BASH_REMATCH[2]} DB_HOST=${BASH_REMATCH[3]} DB_PORT=${BASH_REMATCH[4]}
sql() { MYSQL_PWD=$DB_PASSWORD mysql -N -B -u"$DB_USER" -h"$DB_HOST" -P"$DB_PORT" "$@"; }
sql -e "DROP DATABASE IF EXISTS $DATABASE; CREATE DATABASE $DATABASE CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
DATABASE_URL=${SLURMLENS_DATABASE_URL%/*}/$DATABASE
SLURMLENS_CLUSTERS=lab SLURMLENS_DATABASE_URL="$DATABASE_URL" "$SERVER_BIN" migrate >/dev/null
SECRET=agent-test-ingest-secret-$RANDOM$RANDOM
echo "$SECRET" >"$WORK/ingest.secret"
# The server starts only once the jobs are over: until then the agent's batches wait in its spool.
SERVER_PORT=$((30000 + $$ % 10000))
URL=http://127.0.0.1:$SERVER_PORT

# ---------------------------------------------------------------- the agent ---
# The node the two jobs share: an idle one (all four GPUs free).
NODE=$(sinfo -h -N -p gpu -t idle -o %N | sort -u | head -1)
[[ -n $NODE ]] || fail "no idle lab node for the two jobs: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
PORT=$((20000 + $$ % 10000))
cat >"$WORK/agent.toml" <<EOF2
# Not the node's name: the lab's four slurmd share this host, so records go to the node their process
# runs on (its SLURMD_NODENAME), as on any host running several slurmd.
node = "lab-host"
cluster = "lab"
listen = "127.0.0.1:$PORT"
[bursts]
enabled = false
[mesh]
enabled = false
[cuda]
interval_s = 2
scan_interval_ms = 200
server = "$URL"
secret_file = "$WORK/ingest.secret"
spool_dir = "$WORK/spool"
EOF2
# As its systemd unit runs it: an unprivileged user with exactly the unit's capabilities.
mkdir -p "$WORK/spool" && chown nobody "$WORK/spool"
bash lab/agent.sh exec "$AGENT" "$WORK/agent.toml" >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
metrics() { curl -sf "http://127.0.0.1:$PORT/metrics"; }
for _ in $(seq 1 100); do metrics 2>/dev/null | grep -q '^slurmlens_agent_part_running{part="cuda".*} 1$' && break; sleep 0.1; done
metrics | grep -q '^slurmlens_agent_part_running{part="cuda".*} 1$' || fail "the agent's CUDA part did not start: $(metrics | grep part_running)"
log "server to come at $URL; agent on 127.0.0.1:$PORT as nobody with its unit's capabilities, its uprobes loaded"

# ---------------------------------------------------------------- two jobs on one node ---
# A: 2 GPUs, device 1, 100 iterations; B: 1 GPU, device 0, 37 iterations. Both wait 3 s, then call.
submit() { # user, dir, gpus, device, iterations
  sbatch --parsable -w "$NODE" -J "agent-$2" --uid="$1" --gid="$1" -D "$WORK" -o "$WORK/$2-%j.out" --gres="gpu:$3" -c1 --mem=200 \
    --wrap "srun $WORK/$2/trainer $4 $5 3"
}
JOB_A=$(submit alice a 2 1 100)
JOB_B=$(submit bob b 1 0 37)
log "jobs on $NODE: $JOB_A (alice, gpu:2, device 1, 100 iterations, wheel-named libcudart) and $JOB_B (bob, gpu:1, device 0, 37 iterations)"
gpu_index() { scontrol show job -d "$1" | sed -n 's/.*GRES=gpu[^(]*(IDX:\([0-9,-]*\)).*/\1/p' | head -1; }
IDX_A= IDX_B=
for _ in $(seq 1 600); do
  # Slurm's GPU indices, read while the jobs run (scontrol drops them at the end).
  [[ -n $IDX_A ]] || IDX_A=$(gpu_index "$JOB_A")
  [[ -n $IDX_B ]] || IDX_B=$(gpu_index "$JOB_B")
  states=$(sacct -n -X -P -o State -j "$JOB_A,$JOB_B" | sort -u | tr '\n' ' ')
  [[ $states == "COMPLETED " ]] && break
  [[ $states =~ FAILED|CANCELLED|TIMEOUT ]] && fail "a job ended $states"
  sleep 0.2
done
[[ $states == "COMPLETED " ]] || fail "the jobs did not complete: $states"
# Slurm's IDX list (a-b ranges expanded); the job's CUDA device N is its Nth GPU.
expand() { local part out=(); IFS=, read -ra parts <<<"$1"; for part in "${parts[@]}"; do if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi; done; echo "${out[@]}"; }
read -ra GPUS_A <<<"$(expand "$IDX_A")"
read -ra GPUS_B <<<"$(expand "$IDX_B")"
((${#GPUS_A[@]} == 2 && ${#GPUS_B[@]} == 1)) || fail "scontrol gave GPUs '${GPUS_A[*]}' and '${GPUS_B[*]}'"
GPU_A=${GPUS_A[1]} GPU_B=${GPUS_B[0]}
log "Slurm gave job $JOB_A GPUs ${GPUS_A[*]} (device 1 is GPU $GPU_A), job $JOB_B GPU $GPU_B"

# The server is away: the intervals' batches wait in the spool.
sleep 3
spooled=$(ls "$WORK/spool" | wc -l)
((spooled > 0)) || fail "nothing waits in the spool while the server is away"
log "the server is away: $spooled batches wait in the spool ($(metrics | sed -n 's/^slurmlens_agent_trace_spool_bytes //p') B)"
SLURMLENS_CLUSTERS=lab SLURMLENS_ACCESS__ANONYMOUS=staff SLURMLENS_LISTEN=127.0.0.1:$SERVER_PORT \
  SLURMLENS_DATABASE_URL="$DATABASE_URL" SLURMLENS_INGEST__SECRETS__LAB="$SECRET" SLURMLENS_REPORT__ARCHIVE_INTERVAL_S=0 \
  "$SERVER_BIN" serve >"$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 300); do curl -fs "$URL/api/v1/health" >/dev/null && break; sleep 0.1; done
curl -fs "$URL/api/v1/health" >/dev/null || fail "the server did not come up on $URL"
# The deliverer retries every interval (2 s here); then the spool is empty.
for _ in $(seq 1 150); do
  n=$(sql "$DATABASE" -e "SELECT COUNT(DISTINCT job_id) FROM trace_summaries")
  [[ $n == 2 ]] && [[ -z $(ls -A "$WORK/spool" 2>/dev/null) ]] && break
  sleep 0.1
done
[[ -z $(ls -A "$WORK/spool") ]] || fail "the spool still holds $(ls "$WORK/spool") after the server came back"
sent=$(metrics | sed -n 's/^slurmlens_agent_trace_batches_sent_total //p')
log "the server is back: the spool emptied, $sent batches sent"

# ---------------------------------------------------------------- exactly each job's calls ---
# One line per (job, gpu, category, name): count and bytes summed over the intervals and processes.
got=$(sql "$DATABASE" -e "SELECT s.job_id, s.gpu, s.category, n.name, SUM(s.count), SUM(s.bytes) FROM trace_summaries s
  JOIN trace_names n ON n.name_hash = s.name_hash WHERE s.cluster = 'lab' AND s.node = '$NODE'
  GROUP BY s.job_id, s.gpu, s.category, n.name ORDER BY s.job_id, s.category, n.name" | tr '\t' ' ')
want() { # job, gpu, iterations
  local n=$3
  printf '%s\n' "$1 $2 kernel reduce_rows $n 0" "$1 $2 kernel vector_add(float*, float*, int) $((3 * n)) 0" \
    "$1 $2 memcpy DtoD $n $((512 * n))" "$1 $2 memcpy DtoH $n $((4096 * n))" "$1 $2 memcpy HtoD $n $((1048576 * n))" \
    "$1 $2 nccl AllGather $n $((512 * n))" "$1 $2 nccl AllReduce $n $((4096 * n))" \
    "$1 $2 sync cudaDeviceSynchronize 1 0" "$1 $2 sync cudaStreamSynchronize $n 0"
}
expected=$( (want "$JOB_A" "$GPU_A" 100; want "$JOB_B" "$GPU_B" 37) | sort -k1,1n -k3,3 -k4,4)
got=$(sort -k1,1n -k3,3 -k4,4 <<<"$got")
echo "$got" | sed 's/^/  stored: /'
[[ $got == "$expected" ]] || fail "the stored summaries are not exactly the jobs' calls:
$(diff <(echo "$expected") <(echo "$got"))"
log "stored: exactly each job's calls on its GPU, none across"

# What the job page reads: GET /api/v1/jobs/{id}/traces names the kernels and collectives on the GPU.
traces=$(curl -fs "$URL/api/v1/jobs/$JOB_A/traces")
python3 - "$traces" "$GPU_A" "$NODE" <<'PY' || fail "the job's traces API does not show its calls: $traces"
import json, sys
traces, gpu, node = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
kernels = {k["name"]: k["count"] for k in traces["top_kernels"]}
collectives = {c["name"]: (c["count"], c["bytes"]) for c in traces["top_collectives"]}
assert kernels == {"vector_add(float*, float*, int)": 300, "reduce_rows": 100}, kernels
assert collectives == {"AllReduce": (100, 409600), "AllGather": (100, 51200)}, collectives
assert [(g["node"], g["gpu"]) for g in traces["gpus"]] == [(node, gpu)], traces["gpus"]
# Host-side records time no kernel on the GPU: no verdict is drawn from them.
assert "verdict" not in traces["total"], traces["total"]
PY
log "GET /api/v1/jobs/$JOB_A/traces: vector_add(float*, float*, int) x300 (demangled), reduce_rows x100, AllReduce 100 x 4 KiB, AllGather 100 x 512 B on $NODE GPU $GPU_A; no GPU-time verdict from host-side records"
# The job page says what these records are: host-side calls, no GPU kernel time, no shares drawn; and,
# the lab having no DCGM, not that the GPUs' own activity is charted.
page=$(curl -fs "$URL/jobs/$JOB_A?cluster=lab")
grep -q 'data-host-side="true"' <<<"$page" && grep -q 'Host side only (eBPF on the CUDA and NCCL API)' <<<"$page" \
  && grep -q 'vector_add(float\*, float\*, int)' <<<"$page" && grep -q 'DCGM has no samples of this job' <<<"$page" \
  || fail "the job page does not show the host-side calls as host-side"
log "the job page: the calls shown as host-side, no GPU-time shares"
events=$(metrics | sed -n 's/^slurmlens_agent_cuda_events_total //p')
probes=$(metrics | sed -n 's/^slurmlens_agent_cuda_probes //p')
log "the agent: $probes uprobes on 4 library files, $events calls counted"
((events == 10 * 100 + 1 + 10 * 37 + 1)) || fail "the agent counted $events calls, not $((10 * 137 + 2))"
log "passed"
