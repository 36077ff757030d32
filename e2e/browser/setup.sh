#!/usr/bin/env bash
# Installs what the browser tests need: Debian's Chromium (as root) and playwright-core from npm
# (only its driver; it never downloads a browser). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ! -x /usr/bin/chromium ]]; then
  [[ $(id -u) == 0 ]] || { echo "browser setup: needs root to apt-get install chromium" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
  apt-get -q -y -o DPkg::Lock::Timeout=600 install --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
if [[ ! -d $HERE/node_modules/playwright-core ]]; then
  (cd "$HERE" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
fi
