#!/usr/bin/env bash
# Fuzzes the whole HTTP API from its own OpenAPI document (/api/v1/openapi.json, docs/openapi.json):
# schemathesis (PyPI, pinned in requirements.txt, installed once into e2e/apifuzz/.venv) generates
# requests for every operation, valid and invalid, and checks that none is answered with a 5xx
# (`not_a_server_error`) and that every answer matches the document (`response_schema_conformance`).
#
# The server runs here on the lab's clusters `sakura` and `lab`: anonymous viewers are staff, and so is
# the viewer schemathesis signs in as (`X-Remote-User: apifuzz`, schemathesis.toml), so every job is
# visible and the token endpoints are reached; logs and profiles come from the browser tests' stand-ins;
# its own database is a throwaway one (`slurmlens_test_apifuzz`); and schemathesis sends the ingest
# endpoints the ingest secret of `lab`, so generated bodies get past authentication into decoding and
# validation. Needs `lab/lab.sh up` and a built `slurmlens`. Bounded: APIFUZZ_MAX_TIME seconds of
# generation (default 150), at most APIFUZZ_MAX_EXAMPLES cases per operation and phase (default 60).
# APIFUZZ_SEED replays a run's seed (printed at its end). Reports (JUnit, HAR, and a pytest file that
# replays each failure) and the server log go to e2e/out/apifuzz/.
#
#   bash e2e/apifuzz/run.sh [more schemathesis options, e.g. --include-path /api/v1/jobs]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/e2e/apifuzz
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
BIN=${E2E_SLURMLENS_BIN:-$ROOT/target/debug/slurmlens}
OUT=${E2E_OUT:-$ROOT/e2e/out}/apifuzz
VENV=${APIFUZZ_VENV:-$HERE/.venv}
mkdir -p "$OUT"
[[ -x $BIN ]] || cargo build -q -p slurmlens-server --bin slurmlens

# schemathesis, once per machine (or when requirements.txt changes).
if ! cmp -s "$HERE/requirements.txt" "$VENV/requirements.txt" 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
  cp "$HERE/requirements.txt" "$VENV/requirements.txt"
fi

# A throwaway database, created afresh by the user slurmlens's own database has, with slurmlens's schema
# (`slurmlens migrate`, as a site runs it before the server starts).
[[ $SLURMLENS_DATABASE_URL =~ ^mysql://([^:]+):([^@]+)@([^:/]+):([0-9]+)/ ]] ||
  { echo "SLURMLENS_DATABASE_URL is not mysql://user:password@host:port/db" >&2; exit 1; }
DATABASE=slurmlens_test_apifuzz
MYSQL_PWD=${BASH_REMATCH[2]} mysql -u"${BASH_REMATCH[1]}" -h"${BASH_REMATCH[3]}" -P"${BASH_REMATCH[4]}" \
  -e "DROP DATABASE IF EXISTS $DATABASE; CREATE DATABASE $DATABASE CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
DATABASE_URL=${SLURMLENS_DATABASE_URL%/*}/$DATABASE
SLURMLENS_CLUSTERS=sakura,lab SLURMLENS_DATABASE_URL="$DATABASE_URL" "$BIN" migrate >/dev/null
export APIFUZZ_INGEST_SECRET=apifuzz-ingest-secret-$RANDOM$RANDOM$RANDOM APIFUZZ_USER=apifuzz

rm -f "$OUT/standins.url"
node e2e/browser/standins.mjs "$OUT/standins.url" &
STANDIN_PID=$!
for _ in $(seq 1 100); do [[ -s $OUT/standins.url ]] && break; sleep 0.1; done
STANDINS=$(cat "$OUT/standins.url")

LOG=$OUT/server.log
: >"$LOG" # before the server starts, which opens it in the background
SLURMLENS_CLUSTERS=sakura,lab SLURMLENS_ACCESS__ANONYMOUS=staff SLURMLENS_LISTEN=127.0.0.1:0 \
  SLURMLENS_ACCESS__USER_HEADER=X-Remote-User SLURMLENS_ACCESS__TRUSTED_PROXIES=127.0.0.1 SLURMLENS_ACCESS__STAFF_USERS="[\"$APIFUZZ_USER\"]" \
  SLURMLENS_DATABASE_URL="$DATABASE_URL" SLURMLENS_INGEST__SECRETS__LAB="$APIFUZZ_INGEST_SECRET" \
  SLURMLENS_REPORT__ARCHIVE_INTERVAL_S=0 SLURMLENS_VICTORIALOGS__URL="$STANDINS" SLURMLENS_PYROSCOPE__URL="$STANDINS" \
  SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" "$BIN" serve >"$LOG" 2>&1 &
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

rc=0
# One worker: with two, Hypothesis's lambda descriptions hit CPython 3.11's thread-unsafe AST recursion
# counter ("AST constructor recursion depth mismatch"), an error of the fuzzer, not of the server.
(cd "$HERE" && "$VENV/bin/schemathesis" --config-file "$HERE/schemathesis.toml" run "$URL/api/v1/openapi.json" \
  --url "$URL" \
  --checks not_a_server_error,response_schema_conformance \
  --max-time "${APIFUZZ_MAX_TIME:-150}" --max-examples "${APIFUZZ_MAX_EXAMPLES:-60}" \
  --max-response-time 10 --request-timeout 30 --workers 1 \
  ${APIFUZZ_SEED:+--seed "$APIFUZZ_SEED"} --report junit,pytest,har --report-dir "$OUT" \
  --suppress-health-check too_slow,filter_too_much \
  "$@") || rc=$?
kill -0 "$SERVER" 2>/dev/null || { wait "$SERVER" || echo "the server died (exit status $?); its log: $LOG" >&2; }
if ((rc)); then
  echo "the API fuzzer found failures (above; replay them with $OUT/*.py; server log $LOG)" >&2
fi
exit "$rc"
