#!/usr/bin/env bash
# The node agent (slurmlens-agent) on the lab, as the demo runs it: one agent for the host the lab's four
# slurmd share (each record goes to the node its process runs on, by the process's SLURMD_NODENAME),
# started as its systemd unit starts it (an unprivileged user with the unit's capabilities), posting its
# CUDA/NCCL summaries to a slurmlens server and serving its 100 ms NIC peaks on /metrics, which the lab's
# vmagent scrapes once per lab node (lab/lab.sh). Its ping mesh is off: the four nodes are one host, with
# no path between them to probe (e2e/agent-net.sh tests the mesh across network namespaces).
#
# There is no GPU here. A training job of the lab calls stand-ins of libcudart and libnccl built from C
# with the real symbols and signatures (agent/tests/standin/): what its page shows is what the agent's
# uprobes saw of those calls, on the GPU Slurm gave it.
#
#   bash lab/agent.sh start AGENT_BIN SERVER_URL   # the agent, then one stand-in training job
#   bash lab/agent.sh stop
#   bash lab/agent.sh exec AGENT_BIN CONFIG        # becomes the agent as its unit runs it (e2e/agent-cuda.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
WORK=$LAB/agent
PIDFILE=$WORK/agent.pid
# The port the lab's vmagent scrapes.
PORT=$LAB_AGENT_PORT
die() { echo "lab/agent.sh: $*" >&2; exit 1; }

# Becomes AGENT with CONFIG as its systemd unit runs it: nobody, with exactly the unit's capabilities.
exec_as_unit() {
  local caps
  caps=$(sed -n 's/^AmbientCapabilities=//p' "$ROOT/packaging/agent/slurmlens-agent.service" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd,)
  [[ $caps == +bpf,* ]] || die "no AmbientCapabilities in packaging/agent/slurmlens-agent.service"
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps="-all,$caps" --ambient-caps="-all,$caps" \
    --bounding-set="-all,$caps" "$1" --config "$2"
}

stop() {
  [[ -f $PIDFILE ]] && kill "$(cat "$PIDFILE")" 2>/dev/null || true
  rm -f "$PIDFILE"
}

start() {
  local agent=$1 server=$2
  ((EUID == 0)) || die "needs root (the agent's BPF capabilities)"
  [[ -x $agent ]] || die "no agent binary at $agent"
  stop
  mkdir -p "$WORK/spool" "$WORK/lib" "$WORK/out"
  # The lab's Slurm plugins post with this cluster's secret (lab/install-plugins.sh); so does the agent.
  install -m 0640 -g nogroup "$LAB/etc/slurmlens-plugin.secret" "$WORK/ingest.secret"
  chown nobody "$WORK/spool"
  cat >"$WORK/agent.toml" <<EOF
# Written by lab/agent.sh. The lab's four slurmd share this host: records go to each process's node.
node = "lab-host"
cluster = "lab"
listen = "127.0.0.1:$PORT"
[mesh]
enabled = false
[cuda]
server = "$server"
secret_file = "$WORK/ingest.secret"
spool_dir = "$WORK/spool"
EOF
  setsid bash "$ROOT/lab/agent.sh" exec "$agent" "$WORK/agent.toml" >"$LAB/log/agent.log" 2>&1 &
  echo $! >"$PIDFILE"
  local metrics=http://127.0.0.1:$PORT/metrics
  for _ in $(seq 1 100); do curl -fs "$metrics" 2>/dev/null | grep -q '^slurmlens_agent_part_running{part="cuda".*} 1$' && break; sleep 0.1; done
  curl -fs "$metrics" | grep -q '^slurmlens_agent_part_running{part="cuda".*} 1$' ||
    die "the agent's CUDA part did not start (log: $LAB/log/agent.log)"

  # The stand-in libraries where a pip wheel puts them, and the training program linked against them.
  local standin=$ROOT/agent/tests/standin lib=$WORK/lib/site-packages/nvidia
  mkdir -p "$lib/cuda_runtime/lib" "$lib/nccl/lib"
  gcc -O1 -fPIC -shared -Wl,-soname,libcudart.so.12 -o "$lib/cuda_runtime/lib/libcudart.so.12" "$standin/cudart.c"
  gcc -O1 -fPIC -shared -Wl,-soname,libnccl.so.2 -o "$lib/nccl/lib/libnccl.so.2" "$standin/nccl.c"
  gcc -O1 -o "$WORK/trainer" "$standin/trainer.c" "$lib/cuda_runtime/lib/libcudart.so.12" "$lib/nccl/lib/libnccl.so.2" \
    -Wl,-rpath,"$lib/cuda_runtime/lib:$lib/nccl/lib"
  chmod -R a+rX "$WORK/lib" "$WORK/trainer"
  chmod 1777 "$WORK/out"
  # Two and a half minutes of steps on 2 GPUs: 12 rounds of 500 iterations, 10 s apart (the agent sums
  # 10 s), each 3 s after its process starts (the agent probes a process once it sees the libraries mapped).
  local job
  job=$(sbatch --parsable -J stand-in-training --uid=alice --gid=alice -D "$WORK/out" -o "$WORK/out/%j.out" \
    --gres=gpu:2 -c1 --mem=200 -t 10 --wrap "for round in \$(seq 12); do srun $WORK/trainer 1 500 3; sleep 10; done")
  echo "lab: slurmlens-agent on 127.0.0.1:$PORT (log: $LAB/log/agent.log); stand-in training job $job (alice, 2 GPUs)"
}

case ${1:-} in
  start) (($# == 3)) || die "usage: lab/agent.sh start AGENT_BIN SERVER_URL"; start "$2" "$3" ;;
  stop) stop ;;
  exec) (($# == 3)) || die "usage: lab/agent.sh exec AGENT_BIN CONFIG"; exec_as_unit "$2" "$3" ;;
  *) die "usage: lab/agent.sh start AGENT_BIN SERVER_URL | stop | exec AGENT_BIN CONFIG" ;;
esac
