#!/usr/bin/env bash
# Installs the OpenTelemetry JS SDK packages e2e/otlp/send.mjs exports with (pinned in package-lock.json).
# Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ! -d $HERE/node_modules/@opentelemetry/exporter-logs-otlp-proto ]]; then
  (cd "$HERE" && npm ci --no-audit --no-fund --silent)
fi
