#!/usr/bin/env bash
# lab.sh — a real, loopback-only Slurm lab for slurmlens tests and demos:
# munge, MariaDB, slurmdbd, slurmctld, 4 × slurmd (fake GPUs), VictoriaMetrics (also behind vmauth),
# VictoriaLogs fed by rsyslog and an OpenTelemetry Collector, all with their state in one folder ($LAB).
# See README.md next to this file.
#
#   lab.sh up [--demo]        start what is not running, register what is missing (--demo: without the
#                             servers only the tests use, a current VictoriaMetrics and an OTel Collector)
#   lab.sh down [--purge]     stop what this lab started (and delete its data with --purge)
#   lab.sh status             one line per daemon; exit status 1 if any is down
#   lab.sh mysql-stop|mysql-start   take only MariaDB away and back (503 tests)
#   lab.sh plugins DIR        install slurmlens's Slurm plugins built in DIR (target/debug) and wire them in
#   lab.sh replay-rules FROM TO [VM_URL]   vmalert's recording rules over seeded history (RFC 3339 times)
#   lab.sh history-cluster NAME   register NAME with sakura's accounts and users, rolled up from now (a long history for bench scale)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
LAB=${SLURMLENS_LAB:-$REPO_ROOT/.lab}
MYSQL_PORT=${LAB_MYSQL_PORT:-3306}
VM_PORT=${LAB_VM_PORT:-8428}
# A current VictoriaMetrics beside Debian's 1.79 (what most sites run), built from the Go module proxy.
VM_CURRENT_VERSION=${LAB_VM_CURRENT_VERSION:-v1.151.0}
VM_CURRENT_PORT=${LAB_VM_CURRENT_PORT:-$((VM_PORT + 20))}
CTLD_PORT=${LAB_SLURMCTLD_PORT:-6817}
DBD_PORT=${LAB_SLURMDBD_PORT:-6819}
SLURMD_PORT_BASE=${LAB_SLURMD_PORT_BASE:-17001}
# node_exporter and vmagent sit beside VictoriaMetrics (8429 is vmagent's own default).
NODE_EXPORTER_PORT=${LAB_NODE_EXPORTER_PORT:-$((VM_PORT + 2))}
VMAGENT_PORT=${LAB_VMAGENT_PORT:-$((VM_PORT + 1))}
# vmalert records the long-job rules of `slurmlens rules` (lab/recording-rules.yml) back into VictoriaMetrics.
VMALERT_PORT=${LAB_VMALERT_PORT:-$((VM_PORT + 3))}
# vmauth in front of VictoriaMetrics, on its own default port (8427).
VMAUTH_PORT=${LAB_VMAUTH_PORT:-$((VM_PORT - 1))}
# The OpenTelemetry Collector (lab/otelcol): OTLP/HTTP and health_check on their own default ports; it
# forwards slurmlens's records to the demo's server (e2e/demo.sh listens on 127.0.0.1:8080).
OTELCOL_OTLP_PORT=${LAB_OTELCOL_OTLP_PORT:-4318}
OTELCOL_HEALTH_PORT=${LAB_OTELCOL_HEALTH_PORT:-13133}
OTELCOL_SLURMLENS_URL=${LAB_OTELCOL_SLURMLENS_URL:-http://127.0.0.1:8080}
# How often vmagent scrapes node_exporter: short, so a test job of a few seconds has node series.
NODE_SCRAPE_INTERVAL=${LAB_NODE_SCRAPE_INTERVAL:-2s}
# How long a daemon gets to become ready, or to exit after SIGTERM, before we give up / SIGKILL.
LAB_TIMEOUT=${LAB_TIMEOUT:-60}

NODES=(n1 n2 n3 n4)
GPUS_PER_NODE=4
LAB_USERS=(alice bob carol dave)
PACKAGES=(mariadb-server mariadb-client slurmctld slurmd slurm-client slurmdbd munge victoria-metrics
  prometheus-node-exporter
  rsyslog
  python3-aiosmtpd  # the SMTP server on loopback the notification tests send to
  # slurmlens-agent: its uprobes' BPF C (clang, libbpf's headers), libbpf built by libbpf-sys (make,
  # libelf, zlib, pkg-config), and its network test (e2e/agent-net.sh: nftables; iproute2 and curl are there)
  clang libbpf-dev make libelf-dev zlib1g-dev pkg-config nftables
  # the server's allocator, linked from Debian's build instead of compiled by tikv-jemalloc-sys (env.sh)
  libjemalloc-dev)

ETC=$LAB/etc
RUN=$LAB/run
LOG=$LAB/log
SPOOL=$LAB/spool
MYSQL_DIR=$LAB/mysql
MYCNF=$ETC/my.cnf
MYSQL_SOCK=$MYSQL_DIR/run/mysqld.sock
MUNGE_SOCK=$RUN/munge.socket.2
export SLURM_CONF=$ETC/slurm.conf

# Daemon table: name → pid file and the /proc/PID/comm it must have (comm is cut at 15 chars).
declare -A PIDFILE=(
  [munged]=$RUN/munged.pid
  [mariadbd]=$MYSQL_DIR/run/mariadbd.pid
  [slurmdbd]=$RUN/slurmdbd.pid
  [slurmctld]=$RUN/slurmctld.pid
  [victoria-metrics]=$RUN/victoria-metrics.pid
  [vm-current]=$RUN/vm-current.pid
  [node-exporter]=$RUN/node-exporter.pid
  [vmagent]=$RUN/vmagent.pid
  [vmalert]=$RUN/vmalert.pid
  [vmauth]=$RUN/vmauth.pid
  [victoria-logs]=$RUN/victoria-logs.pid
  [rsyslogd]=$RUN/rsyslogd.pid
  [otelcol]=$RUN/otelcol.pid
)
declare -A COMM=([munged]=munged [mariadbd]=mariadbd [slurmdbd]=slurmdbd [slurmctld]=slurmctld
  [victoria-metrics]=victoria-metrics [node-exporter]=prometheus-node-exporter [vmagent]=vmagent
  [vmalert]=vmalert [vmauth]=vmauth [vm-current]=victoria-metrics-current
  [victoria-logs]=victoria-logs [rsyslogd]=rsyslogd)
COMM[otelcol]=otelcol-slurmlens
for node in "${NODES[@]}"; do
  PIDFILE[slurmd.$node]=$RUN/slurmd.$node.pid
  COMM[slurmd.$node]=slurmd
done
# Start order; `down` walks it backwards.
DAEMONS=(munged mariadbd slurmdbd slurmctld)
for node in "${NODES[@]}"; do DAEMONS+=("slurmd.$node"); done
DAEMONS+=(victoria-metrics node-exporter vmagent vmalert vmauth)
DAEMONS+=(vm-current)
DAEMONS+=(victoria-logs rsyslogd)
DAEMONS+=(otelcol)
# The servers only the tests read (`up --demo` leaves them out): their Go builds take minutes once per
# machine, the Collector's most of all.
declare -A TEST_ONLY=([vm-current]=1 [otelcol]=1)
# 1 in `up --demo`; the lab remembers it (`$RUN/demo-only`) for `status`.
DEMO_ONLY=0

log() { printf 'lab: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { printf '%s' "${EPOCHREALTIME/./}"; } # microseconds; bash ≥ 5 builtin, no fork
# shellcheck source=lab/go-tools.sh
source "$HERE/go-tools.sh"
# shellcheck source=lab/vlogs.sh
source "$HERE/vlogs.sh"

# ---------------------------------------------------------------- liveness ---

# Prints the pid recorded for daemon $1, or nothing.
pid_of() {
  local file=${PIDFILE[$1]} pid=''
  { read -r pid <"$file"; } 2>/dev/null || true
  [[ $pid =~ ^[0-9]+$ ]] && printf '%s' "$pid"
  return 0
}

# True when pid $1 exists, is not a zombie and runs comm $2. `kill -0` is not enough:
# PID 1 here reaps late, so a killed daemon lingers as a zombie for seconds.
pid_alive() {
  local pid=$1 want=${2:0:15} stat comm
  { read -r stat <"/proc/$pid/stat" && read -r comm <"/proc/$pid/comm"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]] || return 1
  [[ $comm == "$want" ]]
}

alive() {
  local pid
  pid=$(pid_of "$1")
  [[ -n $pid ]] && pid_alive "$pid" "${COMM[$1]}"
}

# Polls "$@" until it succeeds or $2 seconds pass; then shows the tail of log $3.
wait_for() {
  local what=$1 timeout=$2 logfile=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $what"
      if [[ -n $logfile && -r $logfile ]]; then tail -n 20 "$logfile" >&2; fi
      return 1
    fi
    sleep 0.2
  done
}

not_alive() { ! alive "$1"; }

# SIGTERM, wait, SIGKILL: only the pid from our own pid file, and only if its comm matches.
stop_daemon() {
  local name=$1 pid
  alive "$name" || return 0
  pid=$(pid_of "$name")
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_for "$name (pid $pid) to exit" "$LAB_TIMEOUT" '' not_alive "$name"; then
    log "$name ignored SIGTERM, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_for "$name (pid $pid) to die" 10 '' not_alive "$name"
  fi
}

# ---------------------------------------------------------------- install ---

ensure_packages() {
  local missing=() pkg
  for pkg in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null) == ii* ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  # Postinst scripts must not start the system-wide mariadb/munge/slurm: a policy-rc.d that
  # exits 101 forbids it. Many images ship one; only create (and later remove) ours if not.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\n# temporary, from slurmlens lab/lab.sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
  fi
  local apt_log=$LOG/apt.log rc=0
  mkdir -p "$LOG"
  {
    DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 update &&
      DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=600 \
        install --no-install-recommends "${missing[@]}"
  } >"$apt_log" 2>&1 || rc=$?
  if [[ $(trap -p EXIT) == *policy-rc.d* ]]; then
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
  if ((rc)); then
    tail -n 30 "$apt_log" >&2
    die "apt-get failed (rc $rc), see $apt_log"
  fi
}

ensure_users() {
  local user
  for user in "${LAB_USERS[@]}"; do
    id -u "$user" >/dev/null 2>&1 || useradd -M -U -s /bin/bash "$user"
  done
}

# ---------------------------------------------------------------- config ----

# Writes stdin to $1 only when the content differs, so mtimes stay put on a no-op `up`.
write_file() {
  local file=$1 mode=${2:-644} tmp
  tmp=$(mktemp "$file.XXXXXX")
  cat >"$tmp"
  chmod "$mode" "$tmp"
  if [[ -f $file ]] && cmp -s "$tmp" "$file"; then
    rm -f "$tmp"
  else
    if [[ -f $file ]]; then log "config changed: $file (restart the lab to apply)"; fi
    mv -f "$tmp" "$file"
  fi
}

# cgroup v1 (memory/cpuset/devices/freezer mounted and writable) gives real OUT_OF_MEMORY jobs and
# device isolation; otherwise fall back to plugins that need no cgroups. LAB_CGROUP=yes|no overrides.
use_cgroups() {
  case ${LAB_CGROUP:-auto} in
  yes) return 0 ;;
  no) return 1 ;;
  esac
  local ctl probe
  for ctl in memory cpuset devices freezer; do
    awk -v p="/sys/fs/cgroup/$ctl" '$2 == p && $3 == "cgroup" { found = 1 } END { exit !found }' \
      /proc/mounts || return 1
  done
  probe=/sys/fs/cgroup/memory/slurmlens-lab-probe.$$
  mkdir "$probe" 2>/dev/null || return 1
  rmdir "$probe"
}

make_dirs() {
  mkdir -p "$ETC" "$RUN" "$LOG" "$SPOOL/slurmctld" "$LAB/munge" "$LAB/dev" "$LAB/vm/data" "$LAB/vmagent" \
    "$LAB/vm-current/data" "$MYSQL_DIR/data" "$MYSQL_DIR/run" "$MYSQL_DIR/log"
  # mariadbd runs as mysql: it silently writes no error log into a root-owned dir.
  chown mysql:mysql "$MYSQL_DIR/data" "$MYSQL_DIR/run" "$MYSQL_DIR/log"
  # munged refuses key/socket dirs that others may write to.
  chmod 700 "$LAB/munge"
  chmod 755 "$LAB" "$RUN"
  # Job output of every lab user goes here (jobs run as alice, bob, …).
  mkdir -p "$LAB/jobs"
  chmod 1777 "$LAB/jobs"
  local node i
  for node in "${NODES[@]}"; do mkdir -p "$SPOOL/slurmd.$node"; done
  # Fake GPUs: char devices with NVIDIA's major 195, so gres + the devices cgroup treat them as real.
  for ((i = 0; i < GPUS_PER_NODE; i++)); do
    [[ -c $LAB/dev/nvidia$i ]] || { rm -f "$LAB/dev/nvidia$i"; mknod "$LAB/dev/nvidia$i" c 195 "$i"; }
  done
}

write_configs() {
  local ctld_host comm_params proctrack taskplugin acctgather last_port cgroup_conf
  # slurmctld binds 127.0.0.1 only with NoCtldInAddrAny *and* SlurmctldHost = short hostname;
  # that needs the hostname to resolve to loopback. Otherwise fall back (binds 0.0.0.0).
  local short addr
  short=$(hostname -s)
  addr=$(getent ahostsv4 "$short" 2>/dev/null | awk 'NR == 1 { print $1 }') || true
  if [[ $addr == 127.* ]]; then
    ctld_host="$short(127.0.0.1)"
    comm_params='CommunicationParameters=NoCtldInAddrAny,NoInAddrAny'
  else
    ctld_host='localhost(127.0.0.1)'
    comm_params='# CommunicationParameters omitted: hostname does not resolve to 127.x'
  fi
  if use_cgroups; then
    proctrack=proctrack/cgroup
    taskplugin=task/cgroup,task/affinity
    acctgather=jobacct_gather/cgroup
    cgroup_conf=$'CgroupPlugin=cgroup/v1\nConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes'
  else
    proctrack=proctrack/linuxproc
    taskplugin=task/none
    acctgather=jobacct_gather/linux
    cgroup_conf='# cgroups are not used by this lab on this machine (see lab.sh use_cgroups)'
  fi
  last_port=$((SLURMD_PORT_BASE + ${#NODES[@]} - 1))

  write_file "$ETC/slurm.conf" <<EOF
# Generated by lab/lab.sh; edit the script, not this file.
ClusterName=lab
SlurmctldHost=$ctld_host
$comm_params
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
StateSaveLocation=$SPOOL/slurmctld
SlurmdSpoolDir=$SPOOL/slurmd.%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.%n.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=socket=$MUNGE_SOCK
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
AccountingStoreFlags=job_comment,job_env,job_script
JobCompType=jobcomp/none
JobAcctGatherType=$acctgather
JobAcctGatherFrequency=task=5
ProctrackType=$proctrack
TaskPlugin=$taskplugin
PrologFlags=Contain
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
GresTypes=gpu
SchedulerParameters=bf_interval=5
SlurmdParameters=config_overrides
MinJobAge=300
MailProg=/bin/true
ReturnToService=2
include $ETC/slurm.extra.conf
NodeName=n[1-${#NODES[@]}] NodeAddr=127.0.0.1 NodeHostname=localhost Port=[$SLURMD_PORT_BASE-$last_port] CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=8000 Gres=gpu:$GPUS_PER_NODE State=UNKNOWN
PartitionName=gpu Nodes=n[1-${#NODES[@]}] Default=YES MaxTime=INFINITE State=UP
PartitionName=debug Nodes=n[1-2] MaxTime=30 State=UP
EOF
  # Plugins (CliFilterPlugins, PlugStackConfig) are added here by other scripts: never overwrite.
  # A comment rather than `touch`: every Slurm client warns "file … is empty" about an empty include.
  [[ -s $ETC/slurm.extra.conf ]] ||
    printf '# Extra slurm.conf lines (plugins); created by lab/lab.sh, never overwritten.\n' \
      >>"$ETC/slurm.extra.conf"

  write_file "$ETC/gres.conf" <<EOF
AutoDetect=off
NodeName=n[1-${#NODES[@]}] Name=gpu File=$LAB/dev/nvidia[0-$((GPUS_PER_NODE - 1))]
EOF
  write_file "$ETC/cgroup.conf" <<<"$cgroup_conf"

  # slurmdbd refuses a slurmdbd.conf that others can read (it holds the DB password).
  write_file "$ETC/slurmdbd.conf" 600 <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
CommunicationParameters=NoInAddrAny
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOF

  write_file "$MYCNF" <<EOF
[mysqld]
user=mysql
datadir=$MYSQL_DIR/data
socket=$MYSQL_SOCK
pid-file=${PIDFILE[mariadbd]}
log-error=$MYSQL_DIR/log/mariadbd.err
port=$MYSQL_PORT
bind-address=127.0.0.1
skip-name-resolve
# Slurm's accounting guide asks for a buffer pool that holds the database and a log wider than the
# default; 2 GiB and 512 MiB let the demo's generator write a five-year history (10 M jobs) without
# evicting the indexes it is filling. Pages are only allocated as they are read, so a small lab stays small.
innodb_buffer_pool_size=2G
innodb_log_file_size=512M
innodb_lock_wait_timeout=900
# The generator builds a long history's indexes after loading its rows: a wider sort buffer than the
# default 1 MiB merges fewer runs (held only while an index is built).
innodb_sort_buffer_size=64M

[client]
user=root
socket=$MYSQL_SOCK
EOF
}

# ---------------------------------------------------------------- daemons ---

munge_ok() { munge -S "$MUNGE_SOCK" -n </dev/null | unmunge -S "$MUNGE_SOCK"; }

start_munged() {
  alive munged && return 0
  [[ -s $LAB/munge/munge.key ]] || mungekey --create --keyfile="$LAB/munge/munge.key"
  chmod 600 "$LAB/munge/munge.key"
  # A socket (and its lock) left by a killed munged makes the new one refuse to start.
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
  munged --socket="$MUNGE_SOCK" --key-file="$LAB/munge/munge.key" --log-file="$LOG/munged.log" \
    --pid-file="${PIDFILE[munged]}" --seed-file="$LAB/munge/munged.seed" </dev/null >>"$LOG/munged.out" 2>&1
  wait_for munged "$LAB_TIMEOUT" "$LOG/munged.log" munge_ok
}

mysql_ping() { mariadb-admin --defaults-file="$MYCNF" --connect-timeout=2 ping; }
mysql_tcp_ok() {
  mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u reader -preaderpw --connect-timeout=2 \
    -e 'SELECT 1' slurm_acct_db
}

start_mariadb() {
  alive mariadbd && return 0
  if [[ ! -d $MYSQL_DIR/data/mysql ]]; then
    log "initialising MariaDB in $MYSQL_DIR/data"
    mariadb-install-db --no-defaults --datadir="$MYSQL_DIR/data" --user=mysql --skip-test-db \
      >"$MYSQL_DIR/log/install-db.log" 2>&1 || { tail -n 20 "$MYSQL_DIR/log/install-db.log" >&2; die "mariadb-install-db failed"; }
  fi
  rm -f "$MYSQL_SOCK" "${PIDFILE[mariadbd]}"
  # --pidfile scopes start-stop-daemon's "already running?" check to this lab's mariadbd.
  start-stop-daemon --start --background --pidfile "${PIDFILE[mariadbd]}" \
    --exec /usr/sbin/mariadbd -- --defaults-file="$MYCNF"
  wait_for "MariaDB on $MYSQL_SOCK" "$LAB_TIMEOUT" "$MYSQL_DIR/log/mariadbd.err" mysql_ping
  wait_for "MariaDB pid file" "$LAB_TIMEOUT" "$MYSQL_DIR/log/mariadbd.err" alive mariadbd
}

# Idempotent: IF NOT EXISTS / GRANT only ever add.
setup_mysql_users() {
  mariadb --defaults-file="$MYCNF" <<'SQL'
CREATE DATABASE IF NOT EXISTS slurmlens CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost', 'slurm'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'reader'@'localhost' IDENTIFIED BY 'readerpw';
CREATE USER IF NOT EXISTS 'reader'@'127.0.0.1' IDENTIFIED BY 'readerpw';
GRANT SELECT ON slurm_acct_db.* TO 'reader'@'localhost', 'reader'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'slurmlens'@'localhost' IDENTIFIED BY 'slurmlenspw';
CREATE USER IF NOT EXISTS 'slurmlens'@'127.0.0.1' IDENTIFIED BY 'slurmlenspw';
GRANT ALL ON slurmlens.* TO 'slurmlens'@'localhost', 'slurmlens'@'127.0.0.1';
GRANT SELECT ON slurm_acct_db.* TO 'slurmlens'@'localhost', 'slurmlens'@'127.0.0.1';
-- Throw-away databases for tests (#[sqlx::test] creates _sqlx_test*; our own slurmlens_test_*).
GRANT ALL ON `slurmlens\_test%`.* TO 'slurmlens'@'localhost', 'slurmlens'@'127.0.0.1';
GRANT ALL ON `\_sqlx\_test%`.* TO 'slurmlens'@'localhost', 'slurmlens'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'seeder'@'127.0.0.1' IDENTIFIED BY 'seederpw';
-- ALTER and INDEX: a long history is loaded without the tables' secondary indexes, built once after;
-- DROP: the tables it replaces are emptied with TRUNCATE.
GRANT SELECT, INSERT, UPDATE, DELETE, ALTER, INDEX, DROP ON slurm_acct_db.* TO 'seeder'@'127.0.0.1';
SQL
}

sacctmgr_ok() { timeout 10 sacctmgr -n show cluster; }

start_slurmdbd() {
  alive slurmdbd && return 0
  slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1
  wait_for "slurmdbd on 127.0.0.1:$DBD_PORT" "$LAB_TIMEOUT" "$LOG/slurmdbd.log" sacctmgr_ok
}

ctld_ok() { timeout 10 scontrol ping | grep -q 'is UP'; }

start_slurmctld() {
  alive slurmctld && return 0
  slurmctld </dev/null >>"$LOG/slurmctld.out" 2>&1
  wait_for "slurmctld on 127.0.0.1:$CTLD_PORT" "$LAB_TIMEOUT" "$LOG/slurmctld.log" ctld_ok
}

# Every slurmd registered and responding. Drained nodes count as up: tests may drain one on purpose.
# Not ready: '*' not responding, power-state suffixes (~ # % !), down, unknown, fail, booting.
nodes_ok() {
  local lines bad
  lines=$(timeout 10 sinfo -h -N -p gpu -o '%N %t') || return 1
  [[ $(wc -l <<<"$lines") -eq ${#NODES[@]} ]] || return 1
  bad=$(awk '$2 ~ /[*~#%!]$/ || $2 ~ /^(down|unk|fail|boot)/' <<<"$lines")
  [[ -z $bad ]]
}

start_slurmds() {
  local node
  for node in "${NODES[@]}"; do
    alive "slurmd.$node" && continue
    # Job cgroups left by a lab that was killed rather than stopped (a session's end): a new job with a
    # reused id would find its old cpuset's children in the way (EBUSY), fail to launch and be requeued.
    # rmdir removes only empty ones, so a live job's cgroups stay.
    find /sys/fs/cgroup/*/"slurm_$node" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
    slurmd -N "$node" </dev/null >>"$LOG/slurmd.$node.out" 2>&1
  done
  wait_for "all slurmd nodes idle" "$LAB_TIMEOUT" "$LOG/slurmctld.log" nodes_ok
}

vm_ok() { [[ $(curl -fsS --max-time 2 "http://127.0.0.1:$VM_PORT/health") == OK ]]; }

start_vm() {
  alive victoria-metrics && return 0
  rm -f "${PIDFILE[victoria-metrics]}"
  start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[victoria-metrics]}" \
    --output "$LOG/victoria-metrics.log" --exec /usr/bin/victoria-metrics -- \
    -storageDataPath="$LAB/vm/data" -httpListenAddr="127.0.0.1:$VM_PORT" \
    "${VM_FLAGS[@]}"
}

# The flags both VictoriaMetrics take: samples queryable at once, no result cache, only exact duplicates
# merged, nothing expired.
VM_FLAGS=(-retentionPeriod=100y -search.latencyOffset=0s -search.disableCache -dedup.minScrapeInterval=1ms)

vm_current_ok() { [[ $(curl -fsS --max-time 2 "http://127.0.0.1:$VM_CURRENT_PORT/health") == OK ]]; }

# The current single-node VictoriaMetrics, built once per machine (lab/go-tools.sh), with the Debian one's
# flags on its own port and data folder. The binary is named victoria-metrics-current: its comm tells the
# two apart.
start_vm_current() {
  alive vm-current && return 0
  local binary
  binary=$(go_tool victoria-metrics-current github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics \
    "$VM_CURRENT_VERSION") || die "building VictoriaMetrics $VM_CURRENT_VERSION failed (needs go and the module proxy)"
  rm -f "${PIDFILE[vm-current]}"
  start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[vm-current]}" \
    --output "$LOG/vm-current.log" --exec "$binary" -- \
    -storageDataPath="$LAB/vm-current/data" -httpListenAddr="127.0.0.1:$VM_CURRENT_PORT" "${VM_FLAGS[@]}"
}

# One real node_exporter for the host, scraped by a real vmagent once per lab node: the four slurmd
# share this host, so each node's series are the host's, under `instance="<node>:9100"` as a site's
# per-node exporters would label them. vmagent writes to VictoriaMetrics with remote write.
start_node_exporter() {
  alive node-exporter && return 0
  rm -f "${PIDFILE[node-exporter]}"
  start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[node-exporter]}" \
    --output "$LOG/node-exporter.log" --exec /usr/bin/prometheus-node-exporter -- \
    --web.listen-address="127.0.0.1:$NODE_EXPORTER_PORT" --collector.disable-defaults \
    --collector.cpu --collector.meminfo --collector.netdev --collector.pressure --collector.loadavg \
    --collector.diskstats
}

node_exporter_ok() { curl -fsS --max-time 2 "http://127.0.0.1:$NODE_EXPORTER_PORT/metrics" | grep -q '^node_cpu_seconds_total'; }

# vmagent also scrapes slurmlens's own /metrics where the demo serves it (e2e/demo.sh, anonymous staff
# there, so no token); a target that is down is only `up == 0`. Grafana: docs/grafana/slurmlens.json.
SLURMLENS_SCRAPE_TARGET=${SLURMLENS_DEMO_LISTEN:-127.0.0.1:8080}
# The node agent where the demo runs it (lab/agent.sh): one for the host, scraped once per lab node as
# node_exporter is; down (`up == 0`) where it does not run.
AGENT_PORT=9464

start_vmagent() {
  local node targets='' agents=''
  for node in "${NODES[@]}"; do
    targets+="      - targets: [\"127.0.0.1:$NODE_EXPORTER_PORT\"]
        labels: {instance: \"$node:9100\"}
"
    agents+="      - targets: [\"127.0.0.1:$AGENT_PORT\"]
        labels: {instance: \"$node\"}
"
  done
  write_file "$ETC/vmagent.yml" <<EOF
# Generated by lab/lab.sh: node_exporter and the node agent of each lab node, and slurmlens itself.
global:
  scrape_interval: $NODE_SCRAPE_INTERVAL
scrape_configs:
  - job_name: node
    static_configs:
$targets
  - job_name: slurmlens
    scrape_interval: 15s
    static_configs:
      - targets: ["$SLURMLENS_SCRAPE_TARGET"]
  - job_name: slurmlens-agent
    scrape_interval: 15s
    static_configs:
$agents
EOF
  # It writes to each VictoriaMetrics that runs (`up --demo` starts no current one).
  local writes=(-remoteWrite.url="http://127.0.0.1:$VM_PORT/api/v1/write")
  if alive vm-current; then writes+=(-remoteWrite.url="http://127.0.0.1:$VM_CURRENT_PORT/api/v1/write"); fi
  # A running vmagent re-reads its scrape configuration on SIGHUP, keeping its queue: no restart, unless
  # it writes elsewhere than it should now (a demo's lab that the tests bring up whole).
  if alive vmagent; then
    if [[ $(cat "$RUN/vmagent.writes" 2>/dev/null) == "${writes[*]}" ]]; then
      kill -HUP "$(pid_of vmagent)"
      return 0
    fi
    stop_daemon vmagent
  fi
  rm -f "${PIDFILE[vmagent]}"
  printf '%s' "${writes[*]}" >"$RUN/vmagent.writes"
  start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[vmagent]}" \
    --output "$LOG/vmagent.log" --exec /usr/bin/vmagent -- \
    -httpListenAddr="127.0.0.1:$VMAGENT_PORT" -promscrape.config="$ETC/vmagent.yml" \
    "${writes[@]}" -remoteWrite.tmpDataPath="$LAB/vmagent" \
    -remoteWrite.flushInterval=1s
}

vmagent_ok() { [[ $(curl -fsS --max-time 2 "http://127.0.0.1:$VMAGENT_PORT/health") == OK ]]; }

# vmalert evaluates the recording rules every 5 minutes and every hour, aligned to the clock, so each
# recorded sample at t covers exactly (t-5m, t] or (t-1h, t]; the report reads long jobs' whole buckets
# from them. The rules file is
# `slurmlens rules` for the default catalogue, committed (a unit test keeps it equal to the generator).
VMALERT_RULES=$ETC/recording-rules.yml
vmalert_args() {
  printf '%s\n' -rule="$VMALERT_RULES" -datasource.url="http://127.0.0.1:$VM_PORT" \
    -remoteWrite.url="http://127.0.0.1:$VM_PORT" -remoteRead.url="http://127.0.0.1:$VM_PORT" \
    -remoteWrite.flushInterval=1s
}

start_vmalert() {
  write_file "$VMALERT_RULES" <"$REPO_ROOT/lab/recording-rules.yml"
  # A running vmalert rereads its rules on SIGHUP (the file may have changed).
  if alive vmalert; then kill -HUP "$(cat "${PIDFILE[vmalert]}")"; return 0; fi
  rm -f "${PIDFILE[vmalert]}"
  local args
  mapfile -t args < <(vmalert_args)
  start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[vmalert]}" \
    --output "$LOG/vmalert.log" --exec /usr/bin/vmalert -- \
    "${args[@]}" -httpListenAddr="127.0.0.1:$VMALERT_PORT" -evaluationInterval=5m
}

vmalert_ok() { [[ $(curl -fsS --max-time 2 "http://127.0.0.1:$VMALERT_PORT/health") == OK ]]; }

# Seeded history never passed a live vmalert: replay the rules over it (idempotent: the samples are
# recomputed alike, and VictoriaMetrics' dedup keeps one per timestamp). Batches of 100 series: a
# fortnight of 5-minute points for 1000 series is over VictoriaMetrics' 32 MB request limit, and vmalert
# drops a refused batch (and still exits 0), so the log is checked too.
# At most 100 points a series per query: vmalert's last write of a replay carries every series it
# still holds, and the long job's 1,473 GPU series at 360 hourly points each (1,000 asked at most) came
# to 64 MB, more than VictoriaMetrics takes in one request (-maxInsertRequestSize, 32 MB), so that batch
# was dropped (a rule without its series).
# A third argument names the VictoriaMetrics read and written (the tests' second pass, against the
# current release, passes its URL); the lab's Debian one otherwise.
cmd_replay_rules() {
  local from=${1:?FROM (RFC 3339)} to=${2:?TO (RFC 3339)} vm=${3:-http://127.0.0.1:$VM_PORT} args group interval
  write_file "$VMALERT_RULES" <"$REPO_ROOT/lab/recording-rules.yml"
  mapfile -t args < <(vmalert_args)
  args=("${args[@]//http:\/\/127.0.0.1:$VM_PORT/$vm}")
  : >"$LOG/vmalert-replay.log"
  # One replay per group, stepping at its interval: Debian's vmalert (1.79) replays every group at
  # -datasource.queryStep (5 minutes by default), which would record an hourly rule every 5 minutes.
  local dir
  dir=$(mktemp -d)
  awk -v dir="$dir" '/^groups:/ { next } /^  - name:/ { n++; file = dir "/" n ".yml"; print "groups:" > file }
    n { print >> file }' "$VMALERT_RULES"
  for group in "$dir"/*.yml; do
    interval=$(sed -n 's/^    interval: *//p' "$group")
    /usr/bin/vmalert "${args[@]/#-rule=*/-rule=$group}" -httpListenAddr=127.0.0.1:0 \
      -replay.timeFrom="$from" -replay.timeTo="$to" -datasource.queryStep="$interval" \
      -replay.disableProgressBar -replay.rulesDelay=0s -replay.maxDatapointsPerQuery=100 \
      -remoteWrite.maxBatchSize=100 \
      -loggerLevel=ERROR >>"$LOG/vmalert-replay.log" 2>&1 || die "vmalert replay failed: see $LOG/vmalert-replay.log"
  done
  rm -rf "$dir"
  if grep -q 'attempts to send request failed' "$LOG/vmalert-replay.log"; then
    die "vmalert replay dropped recorded series: see $LOG/vmalert-replay.log"
  fi
}

# vmauth in front of VictoriaMetrics as sites put it: it serves only the cluster-style prefix
# /select/0/prometheus (the way vmselect does; its -http.pathPrefix strips it before proxying to the
# single node's own API) and only to a client with the bearer token or the user and password below.
VMAUTH_PREFIX=/select/0/prometheus
VMAUTH_TOKEN=lab-vmauth-token
VMAUTH_USER=slurmlens
VMAUTH_PASSWORD=lab-vmauth-pw

start_vmauth() {
  alive vmauth && return 0
  write_file "$ETC/vmauth.yml" <<EOF
# Generated by lab/lab.sh: VictoriaMetrics behind vmauth, for a bearer token or basic auth.
users:
  - bearer_token: "$VMAUTH_TOKEN"
    url_prefix: "http://127.0.0.1:$VM_PORT"
  - username: "$VMAUTH_USER"
    password: "$VMAUTH_PASSWORD"
    url_prefix: "http://127.0.0.1:$VM_PORT"
EOF
  rm -f "${PIDFILE[vmauth]}"
  start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[vmauth]}" \
    --output "$LOG/vmauth.log" --exec /usr/bin/vmauth -- \
    -httpListenAddr="127.0.0.1:$VMAUTH_PORT" -auth.config="$ETC/vmauth.yml" -http.pathPrefix="$VMAUTH_PREFIX"
}

vmauth_ok() {
  [[ $(curl -fsS --max-time 2 -H "Authorization: Bearer $VMAUTH_TOKEN" \
    "http://127.0.0.1:$VMAUTH_PORT$VMAUTH_PREFIX/health") == OK ]]
}

# ---------------------------------------------------------------- collector --

# The OpenTelemetry Collector built by ocb from lab/otelcol/builder.yaml (once per machine, minutes;
# then cached), running lab/otelcol/config.yaml (copied to etc/otelcol.yaml), the configuration a site
# runs, with the lab's values in its environment: OTLP/HTTP in on loopback, slurmlens's records out to
# $OTELCOL_SLURMLENS_URL with the lab cluster's ingest secret (the plugins' secret, which the demo's
# server takes for cluster lab).
OTELCOL_BIN=''
start_otelcol() {
  OTELCOL_BIN=$(ocb_tool "$REPO_ROOT/lab/otelcol/builder.yaml") || die "the OpenTelemetry Collector did not build (see above)"
  write_file "$ETC/otelcol.yaml" <"$REPO_ROOT/lab/otelcol/config.yaml"
  alive otelcol && return 0
  ensure_plugin_secret
  rm -f "${PIDFILE[otelcol]}"
  OTELCOL_OTLP_ENDPOINT=127.0.0.1:$OTELCOL_OTLP_PORT OTELCOL_HEALTH_ENDPOINT=127.0.0.1:$OTELCOL_HEALTH_PORT \
    SLURMLENS_OTLP_ENDPOINT=$OTELCOL_SLURMLENS_URL/api/v1/otlp SLURMLENS_INGEST_SECRET=$(<"$PLUGIN_SECRET") \
    start-stop-daemon --start --background --make-pidfile --pidfile "${PIDFILE[otelcol]}" \
    --output "$LOG/otelcol.log" --exec "$OTELCOL_BIN" -- --config="$ETC/otelcol.yaml"
}

otelcol_ok() { curl -fsS --max-time 2 "http://127.0.0.1:$OTELCOL_HEALTH_PORT/" >/dev/null; }

# ---------------------------------------------------------------- accounting --

# The clusters with sakura's accounts and users: sakura's demo, and the long histories `history-cluster`
# registers beside it.
SAKURA_LIKE=(sakura)

# sacctmgr -i add … exits 1 when the thing exists, so every add below is preceded by a lookup.
register_clusters() {
  local have cluster
  have=$(sacctmgr -n -P show cluster format=cluster)
  for cluster in lab "${SAKURA_LIKE[@]}"; do
    grep -qx "$cluster" <<<"$have" || sacctmgr -i add cluster "$cluster" >/dev/null
  done
}

# Associations present, one "cluster|account|user|qos" per line (user empty for account rows).
ASSOCS=''
load_assocs() { ASSOCS=$(sacctmgr -n -P show assoc format=cluster,account,user,qos); }
has_assoc() { grep -q "^$1|$2|$3|" <<<"$ASSOCS"; }

# Wanted accounts, "cluster account parent" per line; parents come before children.
wanted_accounts() {
  local cluster account
  for cluster in lab "${SAKURA_LIKE[@]}"; do
    printf '%s physics root\n%s ml root\n%s ml-vision ml\n' "$cluster" "$cluster" "$cluster"
  done
  for cluster in "${SAKURA_LIKE[@]}"; do
    for account in llm vision bio climate; do printf '%s %s root\n' "$cluster" "$account"; done
  done
}

# Wanted user associations, "cluster user account default_account" per line.
wanted_users() {
  local cluster i
  local -a groups=(llm vision bio climate)
  for cluster in lab "${SAKURA_LIKE[@]}"; do
    printf '%s alice ml ml\n%s bob physics physics\n' "$cluster" "$cluster"
    printf '%s carol ml-vision ml-vision\n%s carol physics ml-vision\n' "$cluster" "$cluster"
    printf '%s dave physics physics\n' "$cluster"
  done
  # sakura (and its like) only: u01..u24 in four research groups, six each.
  for cluster in "${SAKURA_LIKE[@]}"; do
    for ((i = 1; i <= 24; i++)); do
      printf '%s u%02d %s %s\n' "$cluster" "$i" "${groups[(i - 1) / 6]}" "${groups[(i - 1) / 6]}"
    done
  done
}

# Each `sacctmgr add` costs ~0.5 s, so missing entities are added in batches: first collect, per
# entity, the clusters that lack it; then one call per (parent | clusters) for accounts and per
# (account, default account | clusters) for users. A fresh lab needs 11 adds instead of 31.
register_accounting() {
  local qos cluster user account parent default key
  qos=$(sacctmgr -n -P show qos format=name)
  grep -qx high <<<"$qos" || sacctmgr -i add qos high priority=100 >/dev/null

  load_assocs
  local -A clusters_of=() batch=()
  local -a order=() batches=()
  while read -r cluster account parent; do
    has_assoc "$cluster" "$account" '' && continue
    key="$account|$parent"
    [[ -n ${clusters_of[$key]:-} ]] || order+=("$key")
    clusters_of[$key]+="${clusters_of[$key]:+,}$cluster"
  done < <(wanted_accounts)
  for key in "${order[@]}"; do # order keeps parents before their children
    account=${key%%|*}
    key="${key#*|}|${clusters_of[$key]}"
    [[ -n ${batch[$key]:-} ]] || batches+=("$key")
    batch[$key]+="${batch[$key]:+,}$account"
  done
  for key in "${batches[@]}"; do
    IFS='|' read -r parent cluster <<<"$key"
    sacctmgr -i add account "${batch[$key]}" parent="$parent" cluster="$cluster" >/dev/null
  done

  clusters_of=() batch=() order=() batches=()
  while read -r cluster user account default; do
    has_assoc "$cluster" "$account" "$user" && continue
    key="$user|$account|$default"
    [[ -n ${clusters_of[$key]:-} ]] || order+=("$key")
    clusters_of[$key]+="${clusters_of[$key]:+,}$cluster"
  done < <(wanted_users)
  for key in "${order[@]}"; do
    user=${key%%|*}
    key="${key#*|}|${clusters_of[$key]}"
    [[ -n ${batch[$key]:-} ]] || batches+=("$key")
    batch[$key]+="${batch[$key]:+,}$user"
  done
  for key in "${batches[@]}"; do
    IFS='|' read -r account default cluster <<<"$key"
    sacctmgr -i add user "${batch[$key]}" account="$account" defaultaccount="$default" \
      cluster="$cluster" >/dev/null
  done

  # QOS high for every association; `modify account` also rewrites the user rows below each account.
  load_assocs
  if awk -F'|' '$4 !~ /(^|,)high(,|$)/ { missing = 1 } END { exit !missing }' <<<"$ASSOCS"; then
    sacctmgr -i modify account where cluster="$(IFS=,; echo "lab,${SAKURA_LIKE[*]}")" set qos=normal,high >/dev/null
  fi

  if ! sacctmgr -n -P show account ml withcoord format=account,coordinators | grep -q '|.*carol'; then
    sacctmgr -i add coordinator account=ml names=carol >/dev/null
  fi
}

# slurmctld learns new associations from slurmdbd asynchronously; sbatch with
# AccountingStorageEnforce=associations fails until it has them.
ctld_knows_users() {
  local out user
  out=$(timeout 10 scontrol show assoc_mgr flags=users) || return 1
  for user in "${LAB_USERS[@]}"; do grep -q "UserName=$user(" <<<"$out" || return 1; done
}

write_env() {
  write_file "$LAB/env.sh" <<EOF
# Generated by lab/lab.sh up: \`source\` it to use this lab's Slurm clients and databases.
export LAB=$(printf '%q' "$LAB")
export SLURM_CONF=$(printf '%q' "$SLURM_CONF")
# The server's jemalloc: Debian's (the same 5.3.0), so that no build compiles it again (a minute of
# CPU per profile). Builds with and without it differ: cargo rebuilds the server on a change.
export JEMALLOC_OVERRIDE=/usr/lib/$(gcc -print-multiarch)/libjemalloc_pic.a
export LAB_MYSQL_PORT=$MYSQL_PORT
export LAB_VM_PORT=$VM_PORT
export LAB_NODE_EXPORTER_PORT=$NODE_EXPORTER_PORT
export LAB_VMAGENT_PORT=$VMAGENT_PORT
export LAB_VMALERT_PORT=$VMALERT_PORT
export LAB_AGENT_PORT=$AGENT_PORT
export LAB_MUNGE_SOCKET=$(printf '%q' "$MUNGE_SOCK")
export LAB_MYSQL_SOCKET=$(printf '%q' "$MYSQL_SOCK")
export LAB_MYCNF=$(printf '%q' "$MYCNF")
export SLURMLENS_SLURMDBD_URL=mysql://reader:readerpw@127.0.0.1:$MYSQL_PORT/slurm_acct_db
export SLURMLENS_DATABASE_URL=mysql://slurmlens:slurmlenspw@127.0.0.1:$MYSQL_PORT/slurmlens
export SLURMLENS_SEEDER_URL=mysql://seeder:seederpw@127.0.0.1:$MYSQL_PORT/slurm_acct_db
export SLURMLENS_VM_URL=http://127.0.0.1:$VM_PORT
export LAB_VM_CURRENT_PORT=$VM_CURRENT_PORT
export LAB_VM_CURRENT_VERSION=$VM_CURRENT_VERSION
export LAB_VM_CURRENT_URL=http://127.0.0.1:$VM_CURRENT_PORT
export LAB_VMAUTH_PORT=$VMAUTH_PORT
export LAB_VMAUTH_URL=http://127.0.0.1:$VMAUTH_PORT$VMAUTH_PREFIX
export LAB_VMAUTH_TOKEN=$VMAUTH_TOKEN
export LAB_VMAUTH_USER=$VMAUTH_USER
export LAB_VMAUTH_PASSWORD=$VMAUTH_PASSWORD
export LAB_OTELCOL_OTLP_URL=http://127.0.0.1:$OTELCOL_OTLP_PORT
export LAB_OTELCOL_HEALTH_PORT=$OTELCOL_HEALTH_PORT
export LAB_OTELCOL_BIN=$(printf '%q' "$OTELCOL_BIN")
export SLURMLENS_CLUSTER=lab
export LAB_VLOGS_URL=http://127.0.0.1:$VLOGS_PORT
export LAB_VLOGS_SYSLOG_PORT=$VLOGS_SYSLOG_PORT
EOF
}

print_status() {
  local name pid state down=0
  for name in "${DAEMONS[@]}"; do
    pid=$(pid_of "$name")
    if alive "$name"; then
      state=alive
    elif [[ -f $RUN/demo-only && -n ${TEST_ONLY[$name]:-} ]]; then
      state='not started (--demo)'
    else
      state=dead down=1
    fi
    printf '%-18s %-8s %s\n' "$name" "${pid:--}" "$state"
  done
  return "$down"
}

# ---------------------------------------------------------------- plugins ---

PLUGINS=$LAB/plugins
PLUGIN_CONF=$ETC/slurmlens-plugin.conf
PLUGIN_SECRET=$ETC/slurmlens-plugin.secret

# The lab cluster's ingest secret, shared by the plugins and the collector: created once, root-only.
ensure_plugin_secret() {
  if [[ ! -s $PLUGIN_SECRET ]]; then
    (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$PLUGIN_SECRET")
  fi
  chmod 600 "$PLUGIN_SECRET"
}

# Wires slurmlens's Slurm plugins (slurm-plugin/) in once $LAB/plugins holds them: PluginDir,
# CliFilterPlugins and PlugStackConfig appended to slurm.extra.conf, plugstack.conf, a spool folder,
# and the plugins' config and secret (both created once and then left alone: tests rewrite the
# config to point at their own server; slurmstepd reads it at every job start). Succeeds only when
# slurm.extra.conf or plugstack.conf changed: slurmd loads SPANK plugins (and learns that one has a
# job prolog) only when it starts, so the caller restarts running slurmds.
wire_plugins() {
  [[ -f $PLUGINS/cli_filter_slurmlens.so && -f $PLUGINS/spank_slurmlens.so ]] || return 1
  local changed=1 line before system_dir
  before=$(cat "$ETC/plugstack.conf" 2>/dev/null || true)
  write_file "$ETC/plugstack.conf" <<EOF
# Generated by lab/lab.sh: slurmlens's SPANK plugin (slurm-plugin/spank).
optional $PLUGINS/spank_slurmlens.so conf=$PLUGIN_CONF
EOF
  [[ $before == "$(cat "$ETC/plugstack.conf")" ]] || changed=0
  # Slurm's own plugins stay first in PluginDir; cli_filter_slurmlens.so is found in $PLUGINS.
  system_dir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep -m1 '/cli_filter_none\.so$')")
  for line in "PluginDir=$system_dir:$PLUGINS" "CliFilterPlugins=slurmlens" "PlugStackConfig=$ETC/plugstack.conf"; do
    grep -qxF "$line" "$ETC/slurm.extra.conf" && continue
    printf '%s\n' "$line" >>"$ETC/slurm.extra.conf"
    changed=0
  done
  ensure_plugin_secret
  mkdir -p "$SPOOL/slurmlens"
  chmod 700 "$SPOOL/slurmlens"
  if [[ ! -f $PLUGIN_CONF ]]; then
    local cgroup_line='# cgroup_path: the lab runs without cgroups here'
    use_cgroups && cgroup_line='cgroup_path = "/slurm_%n/uid_%u/job_%j"'
    # Readable by job users: the link in the job output is printed as the user.
    cat >"$PLUGIN_CONF" <<EOF
# slurmlens's Slurm plugins (slurm-plugin/README.md). Created once by lab/lab.sh; tests rewrite it.
public_url = "http://127.0.0.1:8080"
cluster = "lab"
secret_file = "$PLUGIN_SECRET"
spool_dir = "$SPOOL/slurmlens"
timeout_ms = 500
connect_timeout_ms = 200
$cgroup_line
dcgm_job_map_dir = "$RUN/dcgm-job-map"
EOF
    chmod 644 "$PLUGIN_CONF"
  fi
  return "$changed"
}

# Stops the running slurmds so that start_slurmds brings them back with the new plugin stack.
# Jobs survive: their slurmstepds do not depend on slurmd.
stop_slurmds() {
  local node
  for node in "${NODES[@]}"; do
    if alive "slurmd.$node"; then
      log "restarting slurmd.$node (plugin stack changed)"
      stop_daemon "slurmd.$node"
    fi
  done
}

# lab.sh plugins DIR: installs DIR/libcli_filter_slurmlens.so and DIR/libspank_slurmlens.so as
# $LAB/plugins/{cli_filter,spank}_slurmlens.so (a new inode: running processes keep the old mapping),
# wires them in and restarts running slurmds when the wiring changed.
cmd_plugins() {
  local dir=${1:-} name
  [[ -n $dir ]] || die "usage: lab.sh plugins DIR (where cargo built libspank_slurmlens.so)"
  [[ $(id -u) -eq 0 ]] || die "run as root (plugins are loaded by root daemons)"
  mkdir -p "$PLUGINS"
  for name in cli_filter_slurmlens spank_slurmlens; do
    [[ -f $dir/lib$name.so ]] || die "$dir/lib$name.so not found: cargo build --workspace first"
    cmp -s "$dir/lib$name.so" "$PLUGINS/$name.so" && continue
    install -m 755 "$dir/lib$name.so" "$PLUGINS/.$name.so.new"
    mv -f "$PLUGINS/.$name.so.new" "$PLUGINS/$name.so"
    log "installed $PLUGINS/$name.so"
  done
  if wire_plugins && alive slurmctld; then
    stop_slurmds
    start_slurmds
  fi
}

# ---------------------------------------------------------------- commands --

cmd_up() {
  local t0
  t0=$(now)
  [[ $(id -u) -eq 0 ]] || die "run as root (daemons, useradd, apt)"
  ensure_packages
  ensure_users
  make_dirs
  if ((DEMO_ONLY)); then touch "$RUN/demo-only"; else rm -f "$RUN/demo-only"; fi
  write_configs
  start_munged
  start_vm # no dependencies; its start-up overlaps with the database's
  ((DEMO_ONLY)) || start_vm_current
  start_vlogs
  start_mariadb
  setup_mysql_users
  start_slurmdbd
  register_clusters
  start_slurmctld
  if wire_plugins; then stop_slurmds; fi
  start_slurmds
  register_accounting
  wait_for "slurmctld to learn the lab users" "$LAB_TIMEOUT" "$LOG/slurmctld.log" ctld_knows_users
  wait_for "VictoriaMetrics on 127.0.0.1:$VM_PORT" "$LAB_TIMEOUT" "$LOG/victoria-metrics.log" vm_ok
  ((DEMO_ONLY)) || wait_for "VictoriaMetrics $VM_CURRENT_VERSION on 127.0.0.1:$VM_CURRENT_PORT" "$LAB_TIMEOUT" \
    "$LOG/vm-current.log" vm_current_ok
  start_node_exporter
  wait_for "node_exporter on 127.0.0.1:$NODE_EXPORTER_PORT" "$LAB_TIMEOUT" "$LOG/node-exporter.log" node_exporter_ok
  start_vmagent
  wait_for "vmagent on 127.0.0.1:$VMAGENT_PORT" "$LAB_TIMEOUT" "$LOG/vmagent.log" vmagent_ok
  start_vmalert
  wait_for "vmalert on 127.0.0.1:$VMALERT_PORT" "$LAB_TIMEOUT" "$LOG/vmalert.log" vmalert_ok
  start_vmauth
  wait_for "vmauth on 127.0.0.1:$VMAUTH_PORT" "$LAB_TIMEOUT" "$LOG/vmauth.log" vmauth_ok
  wait_for "VictoriaLogs on 127.0.0.1:$VLOGS_PORT" "$LAB_TIMEOUT" "$LOG/victoria-logs.log" vlogs_ok
  start_rsyslog
  wait_for "rsyslog shipping to VictoriaLogs" "$LAB_TIMEOUT" "$LOG/rsyslogd.out" rsyslog_ok
  if ((!DEMO_ONLY)); then
    start_otelcol
    wait_for "the OpenTelemetry Collector on 127.0.0.1:$OTELCOL_OTLP_PORT" "$LAB_TIMEOUT" "$LOG/otelcol.log" otelcol_ok
  fi
  wait_for "MariaDB on 127.0.0.1:$MYSQL_PORT" "$LAB_TIMEOUT" "$MYSQL_DIR/log/mariadbd.err" mysql_tcp_ok
  write_env
  print_status
  local t1
  t1=$(now)
  printf 'lab up in %d.%02d s — source %s/env.sh\n' $(((t1 - t0) / 1000000)) $(((t1 - t0) / 10000 % 100)) "$LAB"
}

# Job processes of this lab: slurmstepd and anything carrying SLURM_JOB_ID, both only when their
# environment names this lab's SLURM_CONF. Never ourselves or our ancestors.
lab_job_pids() {
  local self=$$ p env comm
  local -A skip=()
  p=$self
  while [[ $p =~ ^[0-9]+$ && $p -gt 1 ]]; do
    skip[$p]=1
    p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || break
  done
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ -z ${skip[$p]:-} ]] || continue
    env=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
    grep -qxF "SLURM_CONF=$SLURM_CONF" <<<"$env" || continue
    { read -r comm <"/proc/$p/comm"; } 2>/dev/null || continue
    if [[ $comm == slurmstepd ]] || grep -q '^SLURM_JOB_ID=' <<<"$env"; then
      # Daemons were started with SLURM_CONF too; leave them to stop_daemon.
      case $comm in munged | mariadbd | slurmdbd | slurmctld | slurmd) continue ;; esac
      printf '%s\n' "$p"
    fi
  done
}

no_lab_jobs() { [[ -z $(lab_job_pids) ]]; }
no_queued_jobs() { [[ -z $(timeout 10 squeue -h -o %A) ]]; }

cmd_down() {
  local purge='' t0 name i
  [[ ${1:-} == --purge ]] && purge=1
  t0=$(now)
  if [[ -z ${LAB_KEEP_JOBS:-} ]] && alive slurmctld; then
    local jobs
    jobs=$(timeout 10 squeue -h -o %A | sort -u | tr '\n' ' ') || true
    if [[ -n ${jobs// /} ]]; then
      log "cancelling jobs: $jobs"
      # shellcheck disable=SC2086 # one word per job id
      scancel $jobs || true
      wait_for "jobs to leave the queue" 30 '' no_queued_jobs || true
    fi
  fi
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    name=${DAEMONS[i]}
    if alive "$name"; then
      log "stopping $name (pid $(pid_of "$name"))"
      stop_daemon "$name"
    fi
  done
  if [[ -z ${LAB_KEEP_JOBS:-} ]]; then
    # A slurmstepd that outlived slurmd (or a job process orphaned by one) would keep users busy
    # and hold cgroups; SIGKILL them — only this lab's, recognised by SLURM_CONF in their environ.
    local pids
    pids=$(lab_job_pids | tr '\n' ' ')
    if [[ -n ${pids// /} ]]; then
      log "killing leftover job processes: $pids"
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      wait_for "leftover job processes to die" 10 '' no_lab_jobs || true
    fi
  fi
  if [[ -n $purge ]]; then
    log "purging data in $LAB (keeping etc/ and the munge key)"
    rm -rf "$MYSQL_DIR" "$SPOOL" "$LAB/vm" "$LAB/vm-current" "$LAB/vmagent" "$LOG" "$RUN" "$LAB/jobs" "$LAB/env.sh" "$LAB/mix.tsv" \
      "$LAB/munge/munged.seed"
    rm -rf "$LAB/vlogs" "$RSYSLOG_DIR"
    # Empty per-node cgroup trees left by slurmd (slurm_n1 …); rmdir only removes empty ones.
    local node
    for node in "${NODES[@]}"; do
      find /sys/fs/cgroup/*/"slurm_$node" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
  fi
  local t1
  t1=$(now)
  printf 'lab down in %d.%02d s\n' $(((t1 - t0) / 1000000)) $(((t1 - t0) / 10000 % 100))
}

cmd_mysql_stop() {
  stop_daemon mariadbd
  # Gone means gone: no process and nothing answering on the socket.
  wait_for "MariaDB to stop answering" "$LAB_TIMEOUT" '' not_mysql_ping
}
not_mysql_ping() { ! mysql_ping; }

cmd_mysql_start() {
  start_mariadb
  wait_for "MariaDB on 127.0.0.1:$MYSQL_PORT" "$LAB_TIMEOUT" "$MYSQL_DIR/log/mariadbd.err" mysql_tcp_ok
}

# A cluster for a long generated history (`slurmlens-dev demo seed-history --cluster NAME --days 1825`):
# slurmdbd makes its tables, and it gets sakura's accounts and users, so the same viewers read both.
cmd_history_cluster() {
  local name=$1
  [[ $name =~ ^[a-z][a-z0-9]{0,39}$ ]] || { echo "history-cluster: a cluster name (lower case, e.g. fuji)" >&2; exit 2; }
  SAKURA_LIKE+=("$name")
  register_clusters
  register_accounting
  # Rolled up from now on: slurmdbd otherwise rolls up a new cluster from its oldest record, hour by hour,
  # which for years of generated history holds both cores for a long while (sreport of the generated
  # past then needs `sacctmgr rollup`).
  mariadb --defaults-file="$MYCNF" slurm_acct_db -e "INSERT INTO \`${name}_last_ran_table\`
    (hourly_rollup, daily_rollup, monthly_rollup)
    SELECT UNIX_TIMESTAMP() - UNIX_TIMESTAMP() % 3600, UNIX_TIMESTAMP(CURDATE()),
      UNIX_TIMESTAMP(DATE_FORMAT(CURDATE(), '%Y-%m-01')) FROM DUAL
    WHERE NOT EXISTS (SELECT 1 FROM \`${name}_last_ran_table\`)"
  echo "cluster $name registered with sakura's accounts and users, rolled up from now"
}

usage() {
  sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

case ${1:-} in
up)
  case ${2:-} in
  --demo) DEMO_ONLY=1 ;;
  '') ;;
  *) usage ;;
  esac
  cmd_up
  ;;
down) cmd_down "${2:-}" ;;
status) print_status ;;
mysql-stop) cmd_mysql_stop ;;
mysql-start) cmd_mysql_start ;;
plugins) cmd_plugins "${2:-}" ;;
replay-rules) cmd_replay_rules "${2:-}" "${3:-}" "${4:-}" ;;
history-cluster) cmd_history_cluster "${2:-}" ;;
*) usage ;;
esac
