#!/usr/bin/env bash
# Installs what building the web front end's wasm bundle needs, on Debian 12 as root. Idempotent:
# a second run with everything in place takes seconds. Each piece is what it is because rustup's
# toolchain has no wasm32 std and cannot fetch one here, while Debian ships a rustc with the std's
# source (rustc-web), from which the wasm32 std is built once.
#
#   apt:  rustc-web cargo-web rust-web-src rust-web-llvm lld-22   (Debian's rustc 1.96 + its std source)
#   $WASM_TOOLS_PREFIX (default <repo>/.wasm-tools, git-ignored):
#     sysroot/  the wasm32-unknown-unknown std, built once from rust-web-src (stamp: `rustc -vV`)
#     bin/      wasm-bindgen at exactly the version in Cargo.lock (unoptimised: built in a minute)
#     npm/      binaryen@132 (wasm-opt; Debian's binaryen 108 breaks hydration)
#     env.sh    PATH and the sysroot flag for web/build.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${WASM_TOOLS_PREFIX:-$ROOT/.wasm-tools}
BINARYEN_VERSION=132.0.0
DEB_CARGO=/usr/bin/cargo
DEB_RUSTC=/usr/bin/rustc
log() { printf '[setup-wasm %ss] %s\n' "$SECONDS" "$*"; }
die() { printf 'setup-wasm: %s\n' "$*" >&2; exit 1; }

# --- Debian packages -------------------------------------------------------------------------------
packages=(rustc-web cargo-web rust-web-src rust-web-llvm lld-22)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
  [[ $(id -u) == 0 ]] || die "needs root to install ${missing[*]}"
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
  apt-get -q -y -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ -x $DEB_CARGO && -x $DEB_RUSTC ]] || die "Debian's cargo/rustc are missing after apt"
"$DEB_RUSTC" --print target-list | grep -qx wasm32-unknown-unknown || die "rustc-web lacks wasm32-unknown-unknown"
rustc_version=$("$DEB_RUSTC" -vV)
rustc_release=$(sed -n 's/^release: //p' <<<"$rustc_version")
src_version=$(dpkg-query -W -f='${Version}' rust-web-src)
rustc_deb=$(dpkg-query -W -f='${Version}' rustc-web)
[[ $src_version == "$rustc_deb" ]] || die "rust-web-src $src_version does not match rustc-web $rustc_deb (the std source must match exactly)"

# --- wasm32 std sysroot ----------------------------------------------------------------------------
SYSROOT=$PREFIX/sysroot
LIBDIR=$SYSROOT/lib/rustlib/wasm32-unknown-unknown/lib
STAMP=$SYSROOT/stamp
if [[ ! -f $STAMP || $(cat "$STAMP") != "$rustc_version" ]]; then
  log "building the wasm32 std for rustc $rustc_release (once, ~40 s)"
  work=$PREFIX/std-build
  rm -rf "$work" "$SYSROOT"
  mkdir -p "$work/src" "$LIBDIR"
  cat >"$work/Cargo.toml" <<'TOML'
[package]
name = "std-for-wasm"
version = "0.0.0"
edition = "2021"
[workspace]
[lib]
path = "src/lib.rs"
[profile.release]
debug = false
TOML
  echo '#![no_std]' >"$work/src/lib.rs"
  # LTO in the wasm profile needs bitcode in the std rlibs.
  (cd "$work" && RUSTC_BOOTSTRAP=1 RUSTFLAGS=-Cembed-bitcode=yes RUSTC="$DEB_RUSTC" \
    "$DEB_CARGO" build -q --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
    --target-dir "$work/target")
  cp "$work"/target/wasm32-unknown-unknown/release/deps/*.rlib "$LIBDIR/"
  rm -rf "$work"
  # Smoke test: a crate links against the new sysroot without -Zbuild-std.
  smoke=$(mktemp -d)
  printf 'fn main() { let v: Vec<u8> = vec![1, 2]; std::process::exit(v.len() as i32); }\n' >"$smoke/main.rs"
  "$DEB_RUSTC" --target wasm32-unknown-unknown --sysroot "$SYSROOT" -O "$smoke/main.rs" -o "$smoke/main.wasm" ||
    die "the wasm32 sysroot does not link"
  rm -rf "$smoke"
  echo "$rustc_version" >"$STAMP"
else
  log "wasm32 std for rustc $rustc_release already built"
fi

# --- wasm-bindgen at the Cargo.lock version --------------------------------------------------------
bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock")
[[ -n $bindgen_version ]] || die "no wasm-bindgen in Cargo.lock"
if [[ $("$PREFIX/bin/wasm-bindgen" --version 2>/dev/null) != "wasm-bindgen $bindgen_version" ]]; then
  log "cargo install wasm-bindgen-cli $bindgen_version (~1 min)"
  # Its `wasm-bindgen` binary only, unoptimised: a third of the build's CPU of release's opt-level 3, and
  # it still makes the bundle's bindings in about a second (the same bytes). --locked first; the
  # crates.io mirror here has lacked a locked dependency, so fall back to a fresh resolve.
  install=("$DEB_CARGO" install -q wasm-bindgen-cli --version "=$bindgen_version" --root "$PREFIX" --bin wasm-bindgen)
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 "${install[@]}" --locked 2>/dev/null ||
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 "${install[@]}" --force
else
  log "wasm-bindgen $bindgen_version present"
fi

# --- wasm-opt from npm binaryen ---------------------------------------------------------------------
if [[ $("$PREFIX/npm/node_modules/.bin/wasm-opt" --version 2>/dev/null) != *"version ${BINARYEN_VERSION%%.*}"* ]]; then
  command -v npm >/dev/null || die "npm is needed for binaryen (apt-get install npm)"
  log "npm install binaryen@$BINARYEN_VERSION"
  mkdir -p "$PREFIX/npm"
  npm install --silent --no-audit --no-fund --prefix "$PREFIX/npm" "binaryen@$BINARYEN_VERSION" >/dev/null
else
  log "wasm-opt $BINARYEN_VERSION present"
fi

cat >"$PREFIX/env.sh" <<ENV
# Written by web/setup-wasm.sh: tools for web/build.sh.
export WASM_TOOLS_PREFIX="$PREFIX"
export PATH="$PREFIX/npm/node_modules/.bin:$PREFIX/bin:\$PATH"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="--sysroot=$SYSROOT"
ENV
log "ready: rustc $rustc_release, wasm-bindgen $bindgen_version, binaryen $BINARYEN_VERSION in $PREFIX"
