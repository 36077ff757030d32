#!/usr/bin/env bash
# The Debian package, installed and started on the lab (a step of e2e/test.sh, after the web bundle):
#  1. builds it (packaging/build-deb.sh --ci: the debug binary the tests built) and checks its contents;
#  2. installs it (dpkg -i) and checks the installed unit: `systemd-analyze verify`, its security
#     exposure, and a binary MemoryDenyWriteExecute= allows (no executable stack, no text relocations);
#  3. points the installed configuration at the lab (and an empty database of its own), as a site edits
#     it, and runs the unit's ExecStartPre (the schema) and ExecStart the way systemd would: the
#     configuration handed over as its credential, a transient uid without privileges, the unit's umask
#     and descriptor limit (systemd is not PID 1 here);
#  4. reads /api/v1/health, a lab job it just submitted in a job list, the web bundle, and a 401 without
#     identity; under strace, so that every system call the server made is checked against the unit's
#     SystemCallFilter=, its sockets against RestrictAddressFamilies=, its mappings against
#     MemoryDenyWriteExecute=, the files it opened against ProtectSystem= and ProtectHome= (what
#     systemd would refuse it);
#  5. stops it (SIGTERM: it exits 0) and starts it again with the packaged Unix socket drop-in
#     (examples/unix-socket.conf: its Group= and RuntimeDirectory=): a member of the group reads
#     /api/v1/health over the socket, another user may not connect, the socket goes with the server;
#  6. checks both runs' system calls, then `dpkg -r` (the conffile stays) and `--purge` (nothing stays).
# Needs root, a running lab (lab/lab.sh up) and target/debug/slurmlens; prints each phase's seconds.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
PACKAGE=slurmlens
CONFIG=/etc/slurmlens/slurmlens.toml
# systemd's exposure score times ten (1.1 is 11); above it the unit has lost some of its sandbox.
EXPOSURE_MAX=15

log() { printf '[deb %ss] %s\n' "$SECONDS" "$*"; }
die() { printf 'deb: FAILED: %s\n' "$*" >&2; exit 1; }
phase_started=$SECONDS
phase() { log "$1: $((SECONDS - phase_started)) s"; phase_started=$SECONDS; }

[[ $(id -u) == 0 ]] || die "needs root (dpkg -i, a transient uid)"
declare -A TOOL_PACKAGE=([systemd-analyze]=systemd [setpriv]=util-linux [strace]=strace [readelf]=binutils [curl]=curl
  [gzip]=gzip)
missing=()
for tool in "${!TOOL_PACKAGE[@]}"; do command -v "$tool" >/dev/null || missing+=("${TOOL_PACKAGE[$tool]}"); done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
  apt-get -q -y -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" >/dev/null
fi

WORK=$(mktemp -d /tmp/slurmlens-deb.XXXXXX)
chmod 755 "$WORK"
server_pid=   # strace's; the server is its child
installed_here=0
group_made=0   # the socket drop-in's group, made here (removed at the end)
runtime=       # its runtime directory, made here as systemd would
server_child() { ps -o pid= --ppid "$server_pid" | tr -d ' '; }
cleanup() {
  if [[ -n $server_pid ]]; then
    # strace ends when the server it traces does (stopped itself, it would leave the server running).
    local child
    child=$(server_child)
    [[ -z $child ]] || kill "$child" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if ((installed_here)); then dpkg --purge "$PACKAGE" >/dev/null 2>&1 || true; fi
  [[ $runtime != /run/?* ]] || rm -rf "$runtime"
  ((group_made == 0)) || groupdel "$group" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- 1. build -----------------------------------------------------------------------------------------
deb=$(bash packaging/build-deb.sh --ci)
[[ -f $deb ]] || die "packaging/build-deb.sh named no package"
phase "package built ($(($(stat -c %s "$deb") / 1048576)) MiB)"
contents=$(dpkg-deb -c "$deb")
for wanted in ' ./usr/bin/slurmlens$' '/systemd/system/slurmlens.service$' \
  '^-rw------- (root/root|0/0) .* ./etc/slurmlens/slurmlens.toml$' ' ./usr/share/slurmlens/site/pkg/slurmlens_web_bg.wasm$' \
  ' ./usr/share/slurmlens/site/pkg/slurmlens_web.js$' ' ./usr/share/doc/slurmlens/README.md$' \
  ' ./usr/share/doc/slurmlens/docs/DEPLOY.md$'; do
  grep -Eq -- "$wanted" <<<"$contents" || die "the package lacks $wanted; it holds:"$'\n'"$contents"
done
dpkg-deb -I "$deb" conffiles | grep -qx "$CONFIG" || die "$CONFIG is not a conffile"
dpkg-deb -f "$deb" Depends | grep -q libc6 || die "no libc6 among the package's dependencies"

# --- 2. install, check the unit -----------------------------------------------------------------------
# Someone's own installation is not this test's to replace.
! dpkg-query -W "$PACKAGE" >/dev/null 2>&1 || die "a $PACKAGE package is installed here already; dpkg --purge $PACKAGE first"
installed_here=1
dpkg -i "$deb" >/dev/null
phase "installed"
unit=$(dpkg -L "$PACKAGE" | grep '/systemd/system/slurmlens.service$') || die "no unit installed"
verify=$(systemd-analyze verify "$unit" 2>&1) || die "systemd-analyze verify: $verify"
[[ -z $verify ]] || die "systemd-analyze verify warns: $verify"
security=$(systemd-analyze security --offline=true --threshold=$EXPOSURE_MAX "$unit" 2>&1) \
  || die "the unit's exposure is above $EXPOSURE_MAX/100:"$'\n'"$security"
log "$(grep 'Overall exposure' <<<"$security")"
# MemoryDenyWriteExecute= makes an executable stack or text relocations fail at start.
stack=$(readelf -lW /usr/bin/slurmlens | awk '$1 == "GNU_STACK" { print $7 }')
[[ $stack == RW ]] || die "the binary's stack is '$stack', not RW: MemoryDenyWriteExecute= would stop it"
! readelf -dW /usr/bin/slurmlens | grep -q TEXTREL || die "the binary has text relocations"

# --- 3. configure for the lab, start as the unit would ------------------------------------------------
[[ $(stat -c %a:%U "$CONFIG") == 600:root ]] || die "$CONFIG is $(stat -c %a:%U "$CONFIG"), not 600:root"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port
# slurmlens's own database: a new, empty one, whose schema the unit's ExecStartPre makes.
[[ $SLURMLENS_DATABASE_URL =~ ^mysql://([^:]+):([^@]+)@([^:/]+):([0-9]+)/ ]] ||
  die "SLURMLENS_DATABASE_URL is not mysql://user:password@host:port/db"
MYSQL_PWD=${BASH_REMATCH[2]} mysql -u"${BASH_REMATCH[1]}" -h"${BASH_REMATCH[3]}" -P"${BASH_REMATCH[4]}" \
  -e "DROP DATABASE IF EXISTS slurmlens_test_deb; CREATE DATABASE slurmlens_test_deb CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
database_url=${SLURMLENS_DATABASE_URL%/*}/slurmlens_test_deb
# The lines a site edits: its address and its databases' URLs, each in its own section.
awk -v listen="127.0.0.1:$port" -v base="$base" -v slurmdbd="$SLURMLENS_SLURMDBD_URL" \
    -v database="$database_url" -v vm="$SLURMLENS_VM_URL" '
  /^\[/ { section = $0 }
  /^listen = / && section == "" { $0 = "listen = \"" listen "\"" }
  /^public_url = / && section == "" { $0 = "public_url = \"" base "\"" }
  /^url = / && section == "[slurmdbd]" { $0 = "url = \"" slurmdbd "\"" }
  /^url = / && section == "[database]" { $0 = "url = \"" database "\"" }
  /^url = / && section == "[victoriametrics]" { $0 = "url = \"" vm "\"" }
  # A server that lives for seconds: its archiver would only contend with the tests for their lease.
  /^archive_interval_s = / && section == "[report]" { $0 = "archive_interval_s = 0" }
  { print }' "$CONFIG" >"$WORK/slurmlens.toml"
cat "$WORK/slurmlens.toml" >"$CONFIG"   # in place: the conffile keeps its owner and mode
for edited in "listen = \"127.0.0.1:$port\"" "url = \"$SLURMLENS_SLURMDBD_URL\"" "url = \"$database_url\"" \
  "url = \"$SLURMLENS_VM_URL\"" "archive_interval_s = 0"; do
  grep -qxF "$edited" "$CONFIG" || die "the installed configuration has no line to edit into $edited"
done
shown=$(slurmlens --config "$CONFIG" config) || die "slurmlens config refuses the edited configuration"
password=${SLURMLENS_SLURMDBD_URL#*://*:}
! grep -qF -- ":${password%%@*}@" <<<"$shown" || die "slurmlens config shows slurmdbd's password"

# The unit's own lines, read from the installed file, so that the test follows the unit.
unit_value() { sed -n "s/^$1=//p" "$unit" | tail -1; }
exec_start=$(unit_value ExecStart)
exec_start_pre=$(unit_value ExecStartPre)
[[ $exec_start_pre == *" migrate" ]] || die "the unit no longer applies the schema before the server starts"
credential=$(unit_value LoadCredential)
nofile=$(unit_value LimitNOFILE)
umask_value=$(unit_value UMask)
[[ $(unit_value DynamicUser) == yes && -n $exec_start && $credential == *:"$CONFIG" ]] \
  || die "the unit no longer runs as a DynamicUser with $CONFIG as its credential"
# A uid from systemd's DynamicUser range that names nobody here, like the one systemd would pick.
uid=61184
while getent passwd "$uid" >/dev/null || getent group "$uid" >/dev/null; do uid=$((uid + 1)); done
credentials=$WORK/credentials
mkdir -m 0500 "$credentials"
install -m 0400 -o "$uid" -g "$uid" "${credential#*:}" "$credentials/${credential%%:*}"
chown "$uid:$uid" "$credentials"
read -ra pre <<<"${exec_start_pre//%d/$credentials}"
read -ra command <<<"${exec_start//%d/$credentials}"
touch "$WORK/strace" && chown "$uid" "$WORK/strace"
# Runs a unit's command as systemd would, under `strace` (its options first, then the command); it
# replaces the shell it runs in, so call it in a subshell.
as_the_unit() {
  umask "$umask_value"
  ulimit -n "$nofile"
  cd /
  exec setpriv --reuid="$uid" --regid="$run_gid" --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all \
    strace -f -qq "$@"
}
unit_env=(env -i PATH=/usr/bin:/bin CREDENTIALS_DIRECTORY="$credentials")
run_gid=$uid   # the transient user's own group; the socket drop-in's Group= below
(as_the_unit -o "$WORK/strace" "${unit_env[@]}" "${pre[@]}") >"$WORK/migrate.log" 2>&1 \
  || die "the unit's ExecStartPre failed:"$'\n'"$(cat "$WORK/migrate.log")"
grep -q "migrations applied" "$WORK/migrate.log" || die "ExecStartPre applied no migrations: $(cat "$WORK/migrate.log")"
# Its system calls are checked with the server's below (strace appends).
(as_the_unit -A -o "$WORK/strace" "${unit_env[@]}" "${command[@]}") >"$WORK/server.log" 2>&1 &
server_pid=$!
ready=0
for _ in $(seq 600); do
  curl -fsS "$base/api/v1/health" >"$WORK/health" 2>/dev/null && { ready=1; break; }
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
((ready)) || die "the installed server did not answer /api/v1/health; its log:"$'\n'"$(cat "$WORK/server.log")"
phase "started as uid $uid, healthy ($(cat "$WORK/health"))"

# --- 4. a lab job through the installed server ---------------------------------------------------------
job=$(sbatch --parsable -J deb-check --uid=alice --gid=alice -D "$LAB/jobs" -o /dev/null --wrap=true)
job=${job%%;*}
for _ in $(seq 600); do
  [[ $(sacct -X -n -P -j "$job" -o State 2>/dev/null) == COMPLETED ]] && break
  sleep 0.1
done
[[ $(sacct -X -n -P -j "$job" -o State) == COMPLETED ]] || die "lab job $job did not complete within 60 s"
as_staff=(-H 'X-Remote-User: root')   # the packaged configuration trusts loopback's proxy header; root is staff
# The default window ends at the request's second, so a job submitted in that second is listed a moment later.
listed=0
for _ in $(seq 100); do
  curl -fsS "${as_staff[@]}" "$base/api/v1/jobs?cluster=lab&user=alice&limit=50" >"$WORK/jobs.json"
  python3 - "$WORK/jobs.json" "$job" <<'EOF' && { listed=1; break; }
import json, sys
items = json.load(open(sys.argv[1]))["items"]
sys.exit(not any(item["job_id"] == sys.argv[2] and item["state"] == "COMPLETED" for item in items))
EOF
  sleep 0.1
done
((listed)) || die "job $job is not in the installed server's job list: $(head -c 600 "$WORK/jobs.json")"
status=$(curl -s -o /dev/null -w '%{http_code}' "$base/api/v1/jobs?cluster=lab")
[[ $status == 401 ]] || die "without identity the job list answered $status, not 401 (access.anonymous = nobody)"
curl -fsS "$base/pkg/slurmlens_web_bg.wasm" -o "$WORK/bundle.wasm"
cmp -s "$WORK/bundle.wasm" /usr/share/slurmlens/site/pkg/slurmlens_web_bg.wasm || die "/pkg/ does not serve the packaged bundle"
page=$(curl -fsS "${as_staff[@]}" "$base/jobs/$job?cluster=lab")
grep -q 'pkg/slurmlens_web' <<<"$page" || die "the job page does not load the packaged bundle"
phase "lab job $job listed, its page and the bundle served"

# --- 5. stop, start again on the Unix socket drop-in ------------------------------------------------------
slurmlens_pid=$(server_child)
[[ -n $slurmlens_pid ]] || die "no server process under strace"
kill -TERM "$slurmlens_pid"
code=0
wait "$server_pid" || code=$?
server_pid=
((code == 0)) || die "the server exited $code on SIGTERM; its log:"$'\n'"$(tail -20 "$WORK/server.log")"
phase "stopped"

# --- 5b. the Unix socket drop-in, as systemd would apply it ----------------------------------------------
dropin=/usr/share/doc/slurmlens/examples/unix-socket.conf
[[ -f $dropin ]] || die "the package has no $dropin"
dropin_value() { sed -n "s/^$1=//p" "$dropin" | tail -1; }
group=$(dropin_value Group)
runtime=/run/$(dropin_value RuntimeDirectory)
[[ -n $group && $runtime != /run/ ]] || die "$dropin names no Group= or RuntimeDirectory="
group_made=0
getent group "$group" >/dev/null || { groupadd --system "$group"; group_made=1; }
gid=$(getent group "$group" | cut -d: -f3)
[[ ! -e $runtime ]] || die "$runtime exists already"
install -d -m "$(dropin_value RuntimeDirectoryMode)" -o "$uid" -g "$gid" "$runtime"
socket=$runtime/http.sock
sed -i "s|^listen = .*|listen = \"unix:$socket\"|" "$CONFIG"
install -m 0400 -o "$uid" -g "$uid" "${credential#*:}" "$credentials/${credential%%:*}"   # systemd's copy, anew
run_gid=$gid
(as_the_unit -A -o "$WORK/strace" "${unit_env[@]}" "${command[@]}") >"$WORK/socket.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do [[ -S $socket ]] && break; kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
[[ -S $socket ]] || die "no socket at $socket; the server's log:"$'\n'"$(cat "$WORK/socket.log")"
[[ $(stat -c %a:%G "$socket") == 660:"$group" ]] || die "$socket is $(stat -c %a:%G "$socket"), not 660:$group"
# A member of the group (the proxy's user), and a user who is not one.
as_nobody=(setpriv --reuid=nobody --regid=nogroup --no-new-privs)
health=$("${as_nobody[@]}" --groups="$gid" curl -fsS --unix-socket "$socket" http://localhost/api/v1/health) \
  || die "the group's member could not read /api/v1/health over $socket"
! "${as_nobody[@]}" --clear-groups curl -fsS --unix-socket "$socket" http://localhost/api/v1/health >/dev/null 2>&1 \
  || die "a user outside $group connected to $socket"
slurmlens_pid=$(server_child)
kill -TERM "$slurmlens_pid"
code=0
wait "$server_pid" || code=$?
server_pid=
((code == 0)) || die "the socket's server exited $code on SIGTERM; its log:"$'\n'"$(tail -20 "$WORK/socket.log")"
[[ ! -e $socket ]] || die "the server left $socket behind"
rm -rf "$runtime"
runtime=
((group_made == 0)) || groupdel "$group"
group_made=0
phase "served on $socket to $group's members alone ($health)"

# --- 6. the system calls of both runs, remove ------------------------------------------------------------
# The unit's filter: its allow list less its deny list, each group expanded as systemd expands it.
expand() {
  local name
  for name in "$@"; do
    if [[ $name == @* ]]; then
      # shellcheck disable=SC2046 # one name a line, no spaces
      expand $(systemd-analyze syscall-filter "$name" | sed -n '2,$ { s/^ *//; /^#/d; /^$/d; p }')
    else
      printf '%s\n' "$name"
    fi
  done
}
allowed=$(sed -n 's/^SystemCallFilter=\([^~].*\)/\1/p' "$unit")
denied=$(sed -n 's/^SystemCallFilter=~//p' "$unit")
# shellcheck disable=SC2086 # lists of names
permitted=$(comm -23 <(expand $allowed | sort -u) <(expand $denied | sort -u))
# One line per call, `PID name(args) = result` (or `<... name resumed>` for a call another thread interrupted).
used=$(sed -nE 's/^[0-9]+ +([a-z0-9_]+)\(.*/\1/p; s/^[0-9]+ +<\.\.\. ([a-z0-9_]+) resumed>.*/\1/p' "$WORK/strace" | sort -u)
[[ -n $used ]] || die "strace recorded no system calls"
refused=$(comm -23 <(printf '%s\n' "$used") <(printf '%s\n' "$permitted"))
[[ -z $refused ]] || die "the server made system calls the unit's SystemCallFilter= refuses: $(echo $refused)"
families=$(sed -nE 's/^[0-9]+ +socket(pair)?\((AF_[A-Z0-9]+),.*/\2/p' "$WORK/strace" | sort -u)
for family in $families; do
  [[ " $(unit_value RestrictAddressFamilies) " == *" $family "* ]] \
    || die "the server opened an $family socket, which the unit's RestrictAddressFamilies= refuses"
done
log "$(wc -l <<<"$used") distinct system calls, all allowed by the unit's SystemCallFilter=; sockets:" $(echo $families)
# MemoryDenyWriteExecute=: systemd refuses a mapping both writable and executable, and making one executable.
wx=$(grep -E '^[0-9]+ +(mmap|mprotect|pkey_mprotect)\(.*PROT_EXEC' "$WORK/strace" \
  | grep -E 'PROT_WRITE|^[0-9]+ +(mprotect|pkey_mprotect)\(' || true)
[[ -z $wx ]] || die "the server mapped memory that MemoryDenyWriteExecute= refuses: $wx"
# ProtectSystem=strict without ReadWritePaths=: nothing may be opened for writing but in its private /tmp
# and /dev/null; ProtectHome=: nothing under the homes is even looked at.
writes=$(grep -E '^[0-9]+ +(open|openat|openat2|creat)\(.*O_(WRONLY|RDWR|CREAT)' "$WORK/strace" \
  | grep -vE '"(/dev/null|/tmp/[^"]*|/var/tmp/[^"]*)"' || true)
[[ -z $writes ]] || die "the server opened files for writing, which ProtectSystem=strict refuses: $writes"
homes=$(grep -E '^[0-9]+ +[a-z0-9_]*(open|stat|access|readlink|execve|chdir|mkdir)[a-z0-9_]*\(' "$WORK/strace" \
  | grep -E '"(/home|/root|/run/user)(/[^"]*)?"' || true)
[[ -z $homes ]] || die "the server looked under the homes, which ProtectHome= hides: $homes"

dpkg -r "$PACKAGE" >/dev/null
for gone in /usr/bin/slurmlens "$unit" /usr/share/slurmlens; do
  [[ ! -e $gone ]] || die "$gone is left after dpkg -r"
done
[[ -f $CONFIG ]] || die "dpkg -r removed the edited conffile $CONFIG (only --purge should)"
dpkg --purge "$PACKAGE" >/dev/null
installed_here=0
[[ ! -e /etc/slurmlens ]] || die "/etc/slurmlens is left after dpkg --purge"
! dpkg-query -W "$PACKAGE" >/dev/null 2>&1 || die "dpkg still knows $PACKAGE after --purge"
phase "removed and purged"
log "Debian package: built, installed, served lab job $job, removed in ${SECONDS} s"
