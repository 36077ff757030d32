#!/usr/bin/env bash
# Builds the Debian package target/debian/slurmlens_<version>-1_<arch>.deb with cargo-deb: the binary, the
# systemd unit (packaging/systemd/), /etc/slurmlens/slurmlens.toml (a conffile made from
# slurmlens.example.toml with the packaged paths) and the web bundle (web/build.sh's output, built first).
#
#   bash packaging/build-deb.sh          # a release build: what a site installs
#   bash packaging/build-deb.sh --ci     # packages the debug binary already built, gzip -1 (CI)
#   bash packaging/build-deb.sh --tool   # only builds cargo-deb (e2e/test.sh, while its tests run)
#   bash packaging/build-deb.sh --agent  # the node agent's package, slurmlens-agent_<version>-1_<arch>.deb
#                                        # (agent/Cargo.toml, packaging/agent/: its unit and configuration)
#
# cargo-deb comes from crates.io at a pinned version, built once per machine into
# $SLURMLENS_TOOLS_CACHE (default ~/.cache/slurmlens), whole or not at all, under a lock.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARGO_DEB_VERSION=3.8.0
CACHE=${SLURMLENS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurmlens}
TOOL=$CACHE/cargo-deb-$CARGO_DEB_VERSION
log() { printf '[build-deb %ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf 'build-deb: %s\n' "$*" >&2; exit 1; }

mode=release
case ${1:-} in
  "") ;;
  --ci) mode=ci ;;
  --tool) mode=tool ;;
  --agent) mode=agent ;;
  *) die "usage: $0 [--ci|--tool|--agent]" ;;
esac
cd "$ROOT"

if [[ ! -x $TOOL/bin/cargo-deb ]]; then
  mkdir -p "$CACHE"
  (
    flock 9
    [[ -x $TOOL/bin/cargo-deb ]] && exit 0
    log "cargo install cargo-deb $CARGO_DEB_VERSION (once per machine)"
    rm -rf "$TOOL.tmp"
    cargo install -q cargo-deb --version "$CARGO_DEB_VERSION" --locked --root "$TOOL.tmp" || exit 1
    rm -rf "$TOOL" && mv "$TOOL.tmp" "$TOOL"
  ) 9>"$CACHE/.cargo-deb.lock" || die "installing cargo-deb failed"
fi
[[ $mode != tool ]] || { log "cargo-deb $CARGO_DEB_VERSION ready"; exit 0; }
if [[ $mode == agent ]]; then
  deb=$("$TOOL/bin/cargo-deb" -p slurmlens-agent)
  log "built $deb ($(stat -c %s "$deb") B)"
  printf '%s\n' "$deb"
  exit 0
fi

# The package's configuration is the example's, but for the paths that name this repository's folders:
# the bundle is installed under /usr/share, and the lab's rack layout is only an example for a site.
[[ -f target/site/pkg/slurmlens_web_bg.wasm ]] || die "no web bundle in target/site: run web/setup-wasm.sh and web/build.sh first"
mkdir -p target/packaging
sed -e 's|^site_root = .*|site_root = "/usr/share/slurmlens/site"|' \
    -e 's|^topology = .*|# topology = "/etc/slurmlens/topology.toml"   # example: /usr/share/doc/slurmlens/topology.example.toml|' \
    slurmlens.example.toml >target/packaging/slurmlens.toml
grep -q '^site_root = "/usr/share/slurmlens/site"$' target/packaging/slurmlens.toml && ! grep -q '^topology' target/packaging/slurmlens.toml \
  || die "slurmlens.example.toml no longer has the site_root and topology lines this script rewrites"

args=(-p slurmlens-server)
if [[ $mode == ci ]]; then
  # CI has just built the debug binary for its tests; cargo-deb warns that dev builds are not for release.
  # gzip -1 by the system's gzip: 13 s where cargo-deb's own xz --fast took 32 s, for 20 MB instead of 12.
  [[ -x target/debug/slurmlens ]] || die "no target/debug/slurmlens: cargo build -p slurmlens-server first"
  args+=(--no-build --profile dev --fast --compress-type gz --compress-system)
fi
log "cargo-deb $CARGO_DEB_VERSION ${args[*]}"
deb=$("$TOOL/bin/cargo-deb" "${args[@]}")
log "built $deb ($(stat -c %s "$deb") B)"
printf '%s\n' "$deb"
