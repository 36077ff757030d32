#!/usr/bin/env bash
# The consistency auditor (`slurmlens-dev audit`, docs/PAGES.md) on the seeded demo and the lab: every
# report it reads must agree with its own evidence (facts outside the run, figures without their
# coverage, verdicts against their figures, striped timelines, an XID's time between a job's report and
# its node's page). sakura: the jobs of the telemetry's 46 hours that ended badly and a spread of the
# rest, 400 reports; lab: every GPU job, and every archived report. Needs `lab/lab.sh up`, sakura seeded
# (e2e/seed-sakura.sh) and a built `slurmlens-dev`.
#
#   bash e2e/audit.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=/dev/null
source "${SLURMLENS_LAB:-$ROOT/.lab}/env.sh"
DEV_BIN=${E2E_SLURMLENS_DEV_BIN:-$ROOT/target/debug/slurmlens-dev}
[[ -x $DEV_BIN ]] || cargo build -q -p slurmlens-tools --bin slurmlens-dev
export SLURMLENS_CLUSTERS=sakura,lab SLURMLENS_TOPOLOGY="$ROOT/e2e/topology.toml" SLURMLENS_LOG=${SLURMLENS_LOG:-warn}
"$DEV_BIN" audit --cluster sakura --hours 46 --limit 400 --nodes 12
"$DEV_BIN" audit --cluster lab --hours 2400 --limit 1000 --archived
