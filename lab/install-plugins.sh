#!/usr/bin/env bash
# Builds slurmlens's Slurm plugins (slurm-plugin/) against the installed Slurm's headers and installs them
# into the lab, which wires them into slurm.conf and writes their config and cluster secret (once).
# Used by both of the README's commands: the tests and the demo.
#
#   bash lab/install-plugins.sh [PROFILE]   # a cargo profile: dev (default), demo, release
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PROFILE=${1:-dev}
# Cargo's folder of a profile: `dev` builds into target/debug.
folder=$PROFILE
[[ $PROFILE == dev ]] && folder=debug
# The plugins' plugin_version must match the running Slurm: build against its own headers.
if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' libslurm-dev 2>/dev/null) != ii* ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=600 install --no-install-recommends libslurm-dev >/dev/null
fi
cargo build --profile "$PROFILE" -p slurmlens-cli-filter -p slurmlens-spank
bash lab/lab.sh plugins "${CARGO_TARGET_DIR:-$ROOT/target}/$folder"
