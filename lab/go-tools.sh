#!/usr/bin/env bash
# The site's Go servers the lab runs beside Debian's packages (VictoriaLogs, a current VictoriaMetrics, an
# OpenTelemetry Collector), built once per machine from the Go module proxy and cached by version, so a
# second `lab.sh up` on the same machine starts them in seconds. Sourced by lab/lab.sh; also runnable:
#
#   bash lab/go-tools.sh NAME PACKAGE VERSION   # prints the cached binary's path, building it if absent
#
# The cache is $LAB_GO_CACHE (default ~/.cache/slurmlens/go-tools): one folder per NAME-VERSION holding
# the binary, written whole or not at all (built into a temporary folder, renamed at the end), under a
# lock so two lab starts on one machine build it once.
GO_TOOLS_CACHE=${LAB_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurmlens/go-tools}

# go_tool NAME PACKAGE VERSION: the path of PACKAGE@VERSION's binary, named NAME, built if not cached.
go_tool() {
  local name=$1 package=$2 version=$3
  local dir=$GO_TOOLS_CACHE/$name-$version
  if [[ ! -x $dir/$name ]]; then
    command -v go >/dev/null || { printf 'go-tools: go is not installed (needed for %s)\n' "$name" >&2; return 1; }
    mkdir -p "$GO_TOOLS_CACHE"
    (
      flock 9
      [[ -x $dir/$name ]] && exit 0
      local started=$SECONDS
      rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
      printf 'go-tools: building %s from %s@%s (once per machine)\n' "$name" "$package" "$version" >&2
      GOBIN=$dir.tmp CGO_ENABLED=0 GOFLAGS=-trimpath go install "$package@$version" >&2 || exit 1
      mv "$dir.tmp/${package##*/}" "$dir.tmp/$name" 2>/dev/null || [[ -x $dir.tmp/$name ]] || exit 1
      rm -rf "$dir" && mv "$dir.tmp" "$dir"
      printf 'go-tools: %s built in %ss\n' "$name" "$((SECONDS - started))" >&2
    ) 9>"$GO_TOOLS_CACHE/.lock" || return 1
  fi
  printf '%s\n' "$dir/$name"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  (($# == 3)) || { echo "usage: $0 NAME PACKAGE VERSION" >&2; exit 2; }
  go_tool "$@"
fi
