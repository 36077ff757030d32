#!/usr/bin/env bash
# The architecture's boundaries, checked rather than claimed (ARCHITECTURE.md names each):
# which crate may depend on which, which server layer may import which, and how long a file may grow.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
failed=0
fail() { echo "boundary broken: $*" >&2; failed=1; }

# Crates: `cargo tree -i` exits 0 only when the dependency is in the crate's graph.
members=$(cargo metadata -q --format-version 1 --no-deps | grep -o '"name":"slurmlens-[a-z-]*"' | sort -u)
refuse() { # crate features dependency
  grep -q "\"$1\"" <<<"$members" || { fail "no crate $1"; return; }
  if cargo tree -q -p "$1" $2 -e normal,build -i "$3" >/dev/null 2>&1; then
    fail "$1 ($2) depends on $3"
    cargo tree -q -p "$1" $2 -e normal,build -i "$3" | head -5 >&2
  fi
}
for dependency in sqlx utoipa reqwest; do
  refuse slurmlens-web "--features hydrate" "$dependency"
  refuse slurmlens-web "--features ssr" "$dependency"
done
for dependency in tokio sqlx reqwest axum; do
  refuse slurmlens-slurm "" "$dependency"
  refuse slurmlens-wire "" "$dependency"
done
refuse slurmlens-server "" slurmlens-tools

# Layers of the server: http → app → sources/store → domain, never back up.
layer() { # folder forbidden-import why
  if grep -rnE "$2" "server/src/$1" >&2; then fail "server/src/$1 imports $2 ($3)"; fi
}
layer app 'crate::http|\baxum::' "the application knows no HTTP"
layer domain 'crate::(http|app|sources|store|telemetry)|\b(sqlx|reqwest|axum)::' "the domain is pure"
layer sources 'crate::(http|app|store)' "a source owns one driver and nothing above it"
layer store 'crate::(http|app|sources)' "the store owns our database and nothing above it"
# telemetry.rs (the /metrics instruments) is a leaf every layer but the domain records into.
if grep -nE 'crate::(http|app|sources|store|domain)' server/src/telemetry.rs >&2; then
  fail "server/src/telemetry.rs imports a layer (it is a leaf the layers record into)"
fi

# No source file over 800 lines outside tests: a longer one holds more than one idea.
while read -r lines file; do
  case "$file" in total | */tests/* | *_tests.rs) continue ;; esac
  if ((lines > 800)); then fail "$file has $lines lines (split it; at most 800)"; fi
done < <(git ls-files '*.rs' | xargs wc -l)

if ((failed)); then exit 1; fi
echo "boundaries hold"
