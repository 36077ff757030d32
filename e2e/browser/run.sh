#!/usr/bin/env bash
# Runs the browser tests (or, with --bench, the browser benchmark) against a slurmlens server started
# here on the lab's clusters: `sakura` (30 days of generated history; generated first if missing) and
# `lab`. Needs `lab/lab.sh up`, the site from `web/build.sh`, and a built `slurmlens` and `slurmlens-dev`.
# Screenshots and the server log go to e2e/out/.
#
#   bash e2e/browser/run.sh [--bench] [test-name-filter]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
BIN=${E2E_SLURMLENS_BIN:-$ROOT/target/debug/slurmlens}
DEV_BIN=${E2E_SLURMLENS_DEV_BIN:-$ROOT/target/debug/slurmlens-dev}
OUT=${E2E_OUT:-$ROOT/e2e/out}
SITE=${SLURMLENS_SITE_ROOT:-$ROOT/target/site}
mkdir -p "$OUT"
bash e2e/browser/setup.sh
[[ -x $BIN ]] || cargo build -q -p slurmlens-server --bin slurmlens
[[ -x $DEV_BIN ]] || cargo build -q -p slurmlens-tools --bin slurmlens-dev
[[ -f $SITE/pkg/slurmlens_web_bg.wasm ]] || { echo "no site in $SITE: run web/build.sh" >&2; exit 1; }

# Sakura's history and telemetry (once per lab; e2e/test.sh seeds them before the integration tests).
bash e2e/seed-sakura.sh
# The faults the telemetry planted, with the verdict each job must get (the verdict tests' ground truth).
export E2E_PLANTED=$LAB/sakura-planted.json

LOG=$OUT/server.log
# The pages are checked against the API as it answers at that moment: the archiver, which fills in
# digests under them for tens of minutes after a fresh seeding (and the benchmark's timings), stays off
# here. Its rounds are tested against the lab in server/tests/it/digests.rs.
ARCHIVE_EVERY=0
# The tokens test signs in as the site's proxy would: `X-Remote-User` from loopback, a trusted peer.
# The tests read logs and profiles from stand-ins for VictoriaLogs and Pyroscope (standins.mjs): neither
# server is installable here. The benchmark runs without them, as a site without those sources would.
STANDIN_PID=
SIGNALS=()
if [[ ${1:-} != --bench ]]; then
  rm -f "$OUT/standins.url"
  node e2e/browser/standins.mjs "$OUT/standins.url" &
  STANDIN_PID=$!
  for _ in $(seq 1 100); do [[ -s $OUT/standins.url ]] && break; sleep 0.1; done
  STANDINS=$(cat "$OUT/standins.url")
  SIGNALS=(SLURMLENS_VICTORIALOGS__URL="$STANDINS" SLURMLENS_PYROSCOPE__URL="$STANDINS")
fi
# slurmlens's schema, as a site applies it before the server starts (serve never alters it).
SLURMLENS_CLUSTERS=sakura,lab "$BIN" migrate >/dev/null
# Debian's VictoriaMetrics has no vmui (the server then links none); the lab's current release has one,
# which the charts' vmui links then lead to.
if [[ -n ${LAB_VM_CURRENT_URL:-} ]] && curl -fsS -o /dev/null "$LAB_VM_CURRENT_URL/vmui/"; then
  SIGNALS+=(SLURMLENS_LINKS__VMUI_URL="$LAB_VM_CURRENT_URL/vmui/")
fi
# The notifier runs (the notifications page switches rules only where the site runs them), with no
# channel configured: it sends nothing.
env "${SIGNALS[@]}" SLURMLENS_REPORT__ARCHIVE_INTERVAL_S=$ARCHIVE_EVERY SLURMLENS_CLUSTERS=sakura,lab SLURMLENS_ACCESS__ANONYMOUS=staff SLURMLENS_ACCESS__USER_HEADER=X-Remote-User SLURMLENS_ACCESS__TRUSTED_PROXIES=127.0.0.1 \
  SLURMLENS_NOTIFY__ENABLED=true SLURMLENS_LINKS__GRAFANA_URL=https://grafana.example.org SLURMLENS_LINKS__GRAFANA_DATASOURCE_UID=victoriametrics SLURMLENS_LINKS__GRAFANA_DASHBOARD_UID=slurm-job \
  SLURMLENS_LISTEN=127.0.0.1:0 SLURMLENS_SITE_ROOT="$SITE" SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" "$BIN" serve >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER $STANDIN_PID 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
URL=
for _ in $(seq 1 300); do
  URL=$(sed -n 's|^slurmlens serving at \(http://[^/]*\)/.*|\1|p' "$LOG")
  [[ -n $URL ]] && curl -fs "$URL/api/v1/health" >/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$LOG" >&2; echo "the server exited" >&2; exit 1; }
  sleep 0.1
done
[[ -n $URL ]] || { echo "the server did not come up" >&2; exit 1; }
echo "server at $URL (log: $LOG)"
if [[ ${1:-} == --bench ]]; then
  shift
  # Measured as a server that has been up a while serves: after its start-up read of the charts' last
  # days (`[limits] chart_history_days`; SLURMLENS_LIMITS__CHART_HISTORY_DAYS=0 measures without).
  if [[ ${SLURMLENS_LIMITS__CHART_HISTORY_DAYS:-30} != 0 ]]; then
    for _ in $(seq 1 600); do grep -q "charts' history read" "$LOG" && break; sleep 0.2; done
    grep "charts' history read" "$LOG" | head -1
  fi
  node e2e/browser/bench.mjs "$URL" "$OUT" "$@"
else
  node e2e/browser/tests.mjs "$URL" "$OUT" "$@"
fi
