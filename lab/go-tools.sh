#!/usr/bin/env bash
# The site's Go servers the lab runs beside Debian's packages (VictoriaLogs, a current VictoriaMetrics, an
# OpenTelemetry Collector), built once per machine from the Go module proxy and cached by version, so a
# second `lab.sh up` on the same machine starts them in seconds. Sourced by lab/lab.sh; also runnable:
#
#   bash lab/go-tools.sh NAME PACKAGE VERSION   # prints the cached binary's path, building it if absent
#   bash lab/go-tools.sh --ocb MANIFEST         # the same for a collector built by ocb from MANIFEST
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

# The OpenTelemetry Collector Builder's release; every module in a manifest it builds is at this release.
OCB_VERSION=v0.165.0

# ocb_tool MANIFEST: the path of the collector that the OpenTelemetry Collector Builder makes from
# MANIFEST (an ocb builder.yaml), built if not cached. The cache folder is named after the manifest's
# dist.name and the first 12 hex digits of its sha256, so an edited manifest builds anew; the build runs in
# the temporary folder (a copy of the manifest whose output_path is ./build), under go_tool's lock.
ocb_tool() {
  local manifest=$1 name hash ocb
  [[ -r $manifest ]] || { printf 'go-tools: no manifest %s\n' "$manifest" >&2; return 1; }
  name=$(awk '/^dist:/ { d = 1; next } d && /^[^ #]/ { d = 0 } d && $1 == "name:" { print $2; exit }' "$manifest")
  [[ -n $name ]] || { printf 'go-tools: %s has no dist.name\n' "$manifest" >&2; return 1; }
  hash=$(sha256sum "$manifest") && hash=${hash:0:12}
  local dir=$GO_TOOLS_CACHE/$name-$hash
  if [[ ! -x $dir/$name ]]; then
    ocb=$(go_tool ocb go.opentelemetry.io/collector/cmd/builder "$OCB_VERSION") || return 1
    (
      flock 9
      [[ -x $dir/$name ]] && exit 0
      local started=$SECONDS
      rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
      printf 'go-tools: building %s with ocb %s from %s (once per machine)\n' "$name" "$OCB_VERSION" "$manifest" >&2
      sed 's|^\(  output_path:\).*|\1 ./build|' "$manifest" >"$dir.tmp/builder.yaml"
      (cd "$dir.tmp" && CGO_ENABLED=0 GOFLAGS=-trimpath "$ocb" --config builder.yaml >&2) || exit 1
      mv "$dir.tmp/build/$name" "$dir.tmp/$name" && rm -rf "$dir.tmp/build" || exit 1
      rm -rf "$dir" && mv "$dir.tmp" "$dir"
      printf 'go-tools: %s built in %ss\n' "$name" "$((SECONDS - started))" >&2
    ) 9>"$GO_TOOLS_CACHE/.lock" || return 1
  fi
  printf '%s\n' "$dir/$name"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  if [[ ${1:-} == --ocb && $# == 2 ]]; then
    ocb_tool "$2"
  else
    (($# == 3)) || { echo "usage: $0 NAME PACKAGE VERSION | $0 --ocb MANIFEST" >&2; exit 2; }
    go_tool "$@"
  fi
fi
