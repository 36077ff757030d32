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

# In the server only `main` loads the configuration; `config.rs` alone reads the environment for it.
if git grep -nE 'Config::load\(|env::var|Env::prefixed' -- 'server/src/*.rs' \
  | grep -vE '^server/src/(main|config|config_tests)\.rs:' >&2; then
  fail "server/src loads the configuration or reads the environment outside main.rs (config.rs does it for main)"
fi

# The documents' claims a script can check.
# Sizes: the README is read on one screen or two, ARCHITECTURE.md is a codemap, not a manual.
at_most() { # file bytes
  local size
  size=$(wc -c <"$1")
  if ((size > $2)); then fail "$1 is $size bytes (at most $2: move the detail to docs/ or to the modules' //! docs)"; fi
}
at_most README.md 12288
at_most ARCHITECTURE.md 15360
# The README's two commands, on its first screen.
for command in 'bash e2e/demo.sh' 'bash e2e/test.sh'; do
  grep -qE "^$command( |\$)" <<<"$(head -40 README.md)" || fail "README.md does not show \`$command\` in its first 40 lines"
done
# The subcommands ARCHITECTURE.md lists are those of the binary (`enum Command` in server/src/main.rs), and
# every `slurmlens <subcommand>` a document names is one of them.
subcommands=$(sed -n '/^enum Command {/,/^}/p' server/src/main.rs | grep -oE '^    [A-Z][A-Za-z]*' \
  | sed -E 's/^ +//; s/([a-z])([A-Z])/\1-\2/g' | tr '[:upper:]' '[:lower:]' | sort)
listed=$(grep -m1 'Subcommands:' ARCHITECTURE.md | grep -oE '`[a-z-]+`' | tr -d '`' | sort)
if [[ $listed != "$subcommands" ]]; then
  fail "ARCHITECTURE.md's 'Subcommands:' line lists $(echo $listed), server/src/main.rs has $(echo $subcommands)"
fi
while IFS=: read -r file word; do
  grep -qx "$word" <<<"$subcommands" || fail "$file names \`slurmlens $word\`, which is no subcommand (tools are \`slurmlens-dev\`)"
done < <(grep -oE '`slurmlens [a-z][a-z-]*' README.md ARCHITECTURE.md docs/*.md | sed 's/`slurmlens //')
# Every repository path ARCHITECTURE.md names in backticks exists: from the root, or at the end of a
# tracked path under a folder its section heading names (`jobs.rs` under "### `server/src/app/`").
tracked=$(git ls-files)
named_under() { # folder path
  local escaped
  escaped=$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"${2%/}")
  grep -qE "^${1%.}(.*/)?$escaped(/|\$)" <<<"$tracked"
}
while IFS='|' read -r line folders path; do
  [[ -e $path ]] && ! git check-ignore -q "$path" && continue
  found=0
  for folder in ${folders:-.}; do
    if named_under "$folder" "$path"; then found=1 && break; fi
  done
  ((found)) || fail "ARCHITECTURE.md:$line names \`$path\`, which is not in the repository"
done < <(awk '
  /^```/ { fenced = !fenced; next }
  fenced { next }
  /^#/ { folders = ""; n = split($0, parts, "`"); for (i = 2; i <= n; i += 2) if (parts[i] ~ /\/$/) folders = folders " " parts[i] }
  {
    n = split($0, parts, "`")
    for (i = 2; i <= n; i += 2) {
      token = parts[i]
      if (token !~ /^[A-Za-z0-9_.][A-Za-z0-9_.\/-]*$/) continue
      if (token !~ /\// && token !~ /\.(rs|sh|md|toml|json|mjs|yml|yaml|sql)$/) continue
      printf "%d|%s|%s\n", NR, folders, token
    }
  }' ARCHITECTURE.md)
# Every relative link of the README, ARCHITECTURE.md and docs/ leads to a file, and its #anchor to a heading.
while IFS=$'\t' read -r file target; do
  path=${target%%#*}
  anchor=${target#"$path"}
  resolved=$(dirname "$file")/$path
  [[ -z $path ]] && resolved=$file
  if [[ ! -e $resolved ]]; then fail "$file links to $target, which does not exist"; continue; fi
  [[ -n $anchor && $resolved == *.md ]] || continue
  # GitHub's anchors: a heading in lower case, spaces as hyphens, other punctuation dropped.
  anchors=$(sed -nE 's/^#+ //p' "$resolved" | sed -E 's/[^A-Za-z0-9 _-]//g; s/ /-/g' | tr '[:upper:]' '[:lower:]')
  grep -qx -- "${anchor#\#}" <<<"$anchors" || fail "$file links to $target: no such heading"
done < <(grep -oE '\]\([^)]+\)' README.md ARCHITECTURE.md docs/*.md | sed -E 's/^([^:]*):\]\(([^) ]*).*/\1\t\2/' \
  | grep -vE $'\t(https?:|mailto:)')

if ((failed)); then exit 1; fi
echo "boundaries hold"
