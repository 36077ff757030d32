#!/usr/bin/env bash
# submit-mix.sh OUTFILE — submits a fixed mix of real jobs to the lab (every end state slurmlens
# must understand), waits until each job has reached its expected state in slurmdbd (sacct), then
# writes OUTFILE as TSV: label <TAB> jobid <TAB> expected_state. Needs a running lab (lab.sh up).
# shellcheck disable=SC2016 # the $VARIABLES in --wrap scripts are for the job's shell to expand
set -euo pipefail

OUT=${1:?usage: submit-mix.sh OUTFILE}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB=${SLURMLENS_LAB:-$(cd "$HERE/.." && pwd)/.lab}
# shellcheck source=/dev/null
source "$LAB/env.sh"
JOBS=$LAB/jobs
# The TIMEOUT job alone needs 60–90 s: slurmctld checks time limits every 30 s.
MIX_TIMEOUT=${MIX_TIMEOUT:-150}

declare -A JOBID=() EXPECT=()
LABELS=()

log() { printf 'submit-mix: %s\n' "$*" >&2; }

# expect LABEL JOBID STATE — records one TSV line (and what to wait for).
expect() {
  JOBID[$1]=$2
  EXPECT[$1]=$3
  LABELS+=("$1")
}

# sub LABEL USER EXPECTED_STATE SBATCH_ARGS… — root submits on behalf of USER; without --gid
# the job would run with gid 0. The job name is the label.
sub() {
  local label=$1 user=$2 expected=$3 out
  shift 3
  out=$(sbatch --parsable -J "$label" --uid="$user" --gid="$user" -D "$JOBS" -o "$JOBS/%x-%j.out" "$@")
  expect "$label" "${out%%;*}" "$expected"
}

squeue_state() { squeue -h -j "$1" -o %T 2>/dev/null; }
is_running() { [[ $(squeue_state "$1") == RUNNING ]]; }

# Polls "$@" until it succeeds or $2 seconds pass.
wait_for() {
  local what=$1 timeout=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out after ${timeout}s waiting for $what"; return 1; }
    sleep 0.5
  done
}

# With cgroup memory limits an over-allocating job ends OUT_OF_MEMORY. Without them nothing would
# stop it, so there it runs under `ulimit -v`, tail fails, and the job ends FAILED (exit 1).
if scontrol show config | grep -Eq '^TaskPlugin .*task/cgroup'; then
  oom_expect=OUT_OF_MEMORY
  oom_prefix=''
else
  oom_expect=FAILED
  oom_prefix='ulimit -v 512000; '
fi

# Het job script: one step spanning both components.
cat >"$JOBS/het.sh" <<'EOF'
#!/bin/sh
srun --het-group=0,1 sh -c 'echo "$SLURMD_NODENAME het job $SLURM_JOB_ID"'
EOF
chmod 755 "$JOBS/het.sh"

# An earlier mix's long-lived jobs (the running one, the held one) would pile up run after run and
# starve this mix of GPUs: cancel them first, by their mix labels.
for label in running held; do
  scancel --name="$label" 2>/dev/null || true
done

t0=$SECONDS
# First, so that its 60–90 s overlap with everything else; on two nodes, so that its ranks talk over
# the network and a lossy path is relevant to it.
sub timeout bob TIMEOUT -A physics -N2 --time=1 --wrap 'sleep 600'
sub gpu1node alice COMPLETED -A ml --gres=gpu:2 -c2 --mem=1000 --comment='lab mix: 2 GPUs on one node' \
  --wrap 'srun sh -c "echo gpus=\$CUDA_VISIBLE_DEVICES on \$SLURMD_NODENAME"; exit 0'
sub gpu2node bob COMPLETED -A physics --qos=high -N2 --gres=gpu:4 --ntasks-per-node=1 \
  --wrap 'srun sh -c "echo gpus=\$CUDA_VISIBLE_DEVICES on \$SLURMD_NODENAME"'
sub exit1 carol FAILED -A physics -p debug --wrap 'echo failing; exit 1'
sub signal dave FAILED -A physics --wrap 'kill -9 $$'
sub cancel_running alice CANCELLED -A ml --wrap 'sleep 300'
sub cancel_pending bob CANCELLED -A physics --begin=now+1hour --wrap 'sleep 1'
sub oom alice "$oom_expect" -A ml --mem=100 --wrap "${oom_prefix}head -c 1G /dev/zero | tail >/dev/null"
sub array carol COMPLETED -A ml-vision --array=0-3 -o "$JOBS/%x-%A_%a.out" \
  --wrap 'echo "task $SLURM_ARRAY_TASK_ID on $SLURMD_NODENAME"'
for i in 0 1 2 3; do expect "array_$i" "${JOBID[array]}_$i" COMPLETED; done
sub het alice COMPLETED -A ml -N1 -n1 : -N1 -n1 -A ml "$JOBS/het.sh"
sub running dave RUNNING -A physics --gres=gpu:1 --time=30 --wrap 'sleep 1800'
sub held alice PENDING -A ml --hold --wrap 'sleep 1'
# The batch script's status is that of its last command, the failing step: FAILED, exit 3:0.
sub multistep carol FAILED -A ml-vision --wrap 'srun true; srun sh -c "exit 3"'
log "submitted ${#LABELS[@]} labels in $((SECONDS - t0)) s"

wait_for "cancel_running to start" 60 is_running "${JOBID[cancel_running]}"
scancel "${JOBID[cancel_running]}"
# --begin keeps it PENDING (Reason=BeginTime): it is cancelled before it could ever run.
scancel "${JOBID[cancel_pending]}"

# One sacct call per poll for every job. Het components show as ID+N and array tasks as ID_N;
# a label is done when every row belonging to its id is in the expected state.
SACCT=''
all_done() {
  local ids label id rows
  ids=$(printf '%s\n' "${JOBID[@]}" | sed 's/_.*//' | sort -u | paste -sd,)
  SACCT=$(sacct -n -X -P -j "$ids" -o JobID,State 2>/dev/null) || return 1
  for label in "${LABELS[@]}"; do
    id=${JOBID[$label]}
    rows=$(awk -F'|' -v id="$id" '$1 == id || index($1, id "_") == 1 || index($1, id "+") == 1 { split($2, s, " "); print s[1] }' <<<"$SACCT")
    [[ -n $rows ]] || return 1
    ! grep -qvx "${EXPECT[$label]}" <<<"$rows" || return 1
  done
}

if ! wait_for "every job to reach its expected state" "$MIX_TIMEOUT" all_done; then
  log "not all jobs reached their expected state; sacct says:"
  printf '%s\n' "$SACCT" >&2
  exit 1
fi
log "all jobs in their expected state after $((SECONDS - t0)) s"

{
  for label in "${LABELS[@]}"; do
    printf '%s\t%s\t%s\n' "$label" "${JOBID[$label]}" "${EXPECT[$label]}"
  done
} >"$OUT"

# Summary: what slurmdbd recorded for each label.
printf '%-15s %-9s %-14s %-16s %-9s %s\n' LABEL JOBID EXPECTED SACCT_STATE EXITCODE NODES
ids=$(printf '%s\n' "${JOBID[@]}" | sed 's/_.*//' | sort -u | paste -sd,)
rows=$(sacct -n -X -P -j "$ids" -o JobID,State,ExitCode,NodeList)
for label in "${LABELS[@]}"; do
  id=${JOBID[$label]}
  awk -F'|' -v id="$id" -v label="$label" -v expected="${EXPECT[$label]}" '
    $1 == id || (label !~ /^array_/ && (index($1, id "_") == 1 || index($1, id "+") == 1)) {
      printf "%-15s %-9s %-14s %-16s %-9s %s\n", label, $1, expected, $2, $3, $4 }' <<<"$rows"
done
