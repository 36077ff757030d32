#!/usr/bin/env bash
# The whole test suite, as CI runs it: starts the lab (real MariaDB, munge, slurmdbd, slurmctld,
# 4 slurmd, VictoriaMetrics on loopback), then formatting, lints, the architecture's boundaries, unit,
# property and integration tests, the fuzzers (docs/FUZZING.md), then the web bundle (built in the
# background while the tests run), the browser tests and the Debian package. Each step prints when it
# starts; at the end (or at a failure) a table says how long each took.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

STEPS=()
step_name='' step_start=0
# Closes the step that is running (its name and seconds into STEPS), and starts the next one, if named.
step() {
  [[ -n $step_name ]] && STEPS+=("$(printf '%5ss  %s' "$((SECONDS - step_start))" "$step_name")")
  step_name=$* step_start=$SECONDS
  [[ -n $step_name ]] || return 0
  printf "\n=== %s (%ss, disk free %s)\n" "$*" "$SECONDS" "$(df -h --output=avail . | tail -1 | tr -d " ")"
}
summary() {
  local status=$?
  [[ -z ${WEB_PID:-} ]] || kill -- -"$WEB_PID" 2>/dev/null || true
  step
  printf '\n=== time per step (%s after %ss)\n' "$( ((status == 0)) && echo passed || echo "FAILED, exit $status")" "$SECONDS"
  printf '%s\n' "${STEPS[@]}"
}
trap summary EXIT

step "lab up"
bash lab/lab.sh up
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"

step "slurm plugins: Slurm headers, build, install into the lab"
bash lab/install-plugins.sh dev

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "crate and layer boundaries, file sizes"
bash e2e/boundaries.sh

step "OpenTelemetry JS SDK (npm) for the OTLP integration test"
bash e2e/otlp/setup.sh
# Installed, so the test that exports through the SDK must run rather than skip. (Not a SLURMLENS_
# variable: those are configuration, and an unknown key is an error.)
export E2E_REQUIRE_OTLP_SDK=1

step "sakura's demo history and telemetry in the lab (the digests, grid and browser tests read them)"
cargo build -q -p slurmlens-server --bin slurmlens -p slurmlens-tools --bin slurmlens-dev
bash e2e/seed-sakura.sh

step "cargo test --no-run (the test binaries)"
# One cargo invocation for the whole workspace: one feature resolution, so nothing is built twice.
cargo test -q --workspace --no-run

# The web bundle (and its toolchain, set up once per machine), then the Debian packager, build while the
# tests run: they wait on Slurm and the databases as much as they compute, and the bundle's last crate
# holds one core.
WEB_LOG=$ROOT/.lab/web-build.log
# Its own session, so that a failure before the wait stops the whole build (summary()).
setsid bash -c 'bash web/setup-wasm.sh && bash web/build.sh && bash packaging/build-deb.sh --tool' >"$WEB_LOG" 2>&1 &
WEB_PID=$!

step "cargo test (unit, property, SSR, integration against the lab; the web bundle builds beside them)"
cargo test --workspace --no-fail-fast -- --nocapture 2>&1 | tee "$ROOT/.lab/last-test.log" \
  | grep -E '^(test |running |test result|failures|---- |thread )' || true
if ! grep -q '^test result' "$ROOT/.lab/last-test.log" || grep -Eq '^test result: FAILED|error: test failed|could not compile' "$ROOT/.lab/last-test.log"; then
  tail -80 "$ROOT/.lab/last-test.log"
  # With --nocapture a panic's message follows its "panicked at" line, wherever the test ran in the log.
  grep -A4 'panicked at' "$ROOT/.lab/last-test.log" | head -60 || true
  echo "tests FAILED" >&2
  exit 1
fi

step "the tests that read VictoriaMetrics, again against $LAB_VM_CURRENT_VERSION (lab/lab.sh: Debian's is 1.79)"
# The test binary built above; every module whose tests read or write VictoriaMetrics (not replicas: its
# vmauth stands in front of Debian's, so its report through vmauth would compare the two versions).
LAB_VM_UNDER_TEST=current cargo test -p slurmlens-server --test it -- --nocapture access:: digests:: failure:: \
  grid:: long_jobs:: node_signals:: report:: tenancy:: vm_versions:: 2>&1 | tee "$ROOT/.lab/last-test-vm-current.log" \
  | grep -E '^(test |running |test result|failures|---- |thread )' || true
if ! grep -q '^test result: ok' "$ROOT/.lab/last-test-vm-current.log"; then
  tail -80 "$ROOT/.lab/last-test-vm-current.log"
  echo "tests against VictoriaMetrics $LAB_VM_CURRENT_VERSION FAILED" >&2
  exit 1
fi

step "slurmlens-agent: bursts and ping mesh in network namespaces, CUDA/NCCL uprobes in two lab jobs"
bash e2e/agent-net.sh && bash e2e/agent-cuda.sh

step "fuzz targets, long (docs/FUZZING.md)"
# The test binaries just built, only their fuzz targets, with more cases. The timeout bounds the step: a
# parser too slow to get through its cases in it is itself a finding.
PROPTEST_CASES=${FUZZ_CASES:-4096} timeout 240 cargo test -q --workspace --lib -- fuzz_tests:: 2>&1 \
  | { grep -Ev '^(running 0 tests|test result: ok\. 0 passed.*)?$' || true; }

step "API fuzzing: schemathesis from docs/openapi.json against the server on the lab (docs/FUZZING.md)"
APIFUZZ_MAX_TIME=${APIFUZZ_MAX_TIME:-150} bash e2e/apifuzz/run.sh

# The browser tests seed their demo data with slurmlens-dev. `cargo test` above builds it for the tools'
# CLI test; build it here if not, while the build outputs it needs are still there.
[[ -x target/debug/slurmlens-dev ]] || cargo build -p slurmlens-tools --bin slurmlens-dev

step "consistency audit: reports against their own evidence, sakura and the lab (e2e/audit.sh)"
bash e2e/audit.sh

if [[ ${CI_PRUNE_BUILD:-0} == 1 ]]; then
  # CI's disk is small: the test binaries are done with. The binaries the browser tests run stay
  # (target/debug/slurmlens and slurmlens-dev are hard links of their build outputs), so do the
  # installed plugins.
  step "prune debug build outputs (CI)"
  rm -rf target/debug/deps target/debug/build target/debug/.fingerprint target/debug/incremental
fi

step "web: the browser bundle (built since the tests started; log $WEB_LOG)"
if ! wait "$WEB_PID"; then
  tail -40 "$WEB_LOG"
  echo "the web bundle did not build" >&2
  exit 1
fi
grep -E '^\[(setup-wasm|web/build|build-deb)' "$WEB_LOG"

step "browser tests (Debian's headless Chromium against the server on sakura + lab; screenshots in e2e/out)"
bash e2e/browser/run.sh

step "Debian package: built from the debug binary, installed, started as its unit would on the lab, removed"
# After the web bundle, which it packages; cargo-deb is built once per machine (packaging/build-deb.sh).
bash e2e/deb.sh

step "docker compose config (only where a Docker client with compose exists)"
if docker compose version >/dev/null 2>&1; then
  SLURMLENS_DB_PASSWORD=x SLURMLENS_PROXY_SECRET=x SLURMLENS_CLUSTERS=lab SLURMDBD_URL=mysql://r@h/db docker compose -f docker-compose.yml config --quiet
elif command -v docker-compose >/dev/null 2>&1; then
  SLURMLENS_DB_PASSWORD=x SLURMLENS_PROXY_SECRET=x SLURMLENS_CLUSTERS=lab SLURMDBD_URL=mysql://r@h/db docker-compose -f docker-compose.yml config --quiet
else
  echo "no docker compose client here; skipped"
fi

step "all tests passed"
