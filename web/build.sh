#!/usr/bin/env bash
# Builds the browser bundle into the site folder (default <repo>/target/site):
#   pkg/slurmlens_web.js, pkg/slurmlens_web_bg.wasm (+ .gz, served precompressed)
# with Debian's cargo/rustc 1.96 and the wasm32 sysroot from web/setup-wasm.sh (run that once first).
# The server serves it when configured with site_root (SLURMLENS_SITE_ROOT); without it, pages are
# server-rendered only.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${WASM_TOOLS_PREFIX:-$ROOT/.wasm-tools}
SITE=${SLURMLENS_SITE_ROOT:-$ROOT/target/site}
PROFILE=${WASM_PROFILE:-wasm-release}
[[ -f $PREFIX/env.sh ]] || { echo "build.sh: no $PREFIX/env.sh; run web/setup-wasm.sh first" >&2; exit 1; }
# shellcheck source=/dev/null
source "$PREFIX/env.sh"
cd "$ROOT"
log() { printf '[web/build %ss] %s\n' "$SECONDS" "$*"; }

log "cargo (Debian rustc $(/usr/bin/rustc --version | cut -d' ' -f2)) → wasm32, profile $PROFILE"
RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo rustc -q -p slurmlens-web --lib \
  --target wasm32-unknown-unknown --profile "$PROFILE" --no-default-features --features hydrate \
  --crate-type cdylib
WASM=$ROOT/target/wasm32-unknown-unknown/$PROFILE/slurmlens_web.wasm

# The site is made from this very wasm already (a second demo, the tests after it): wasm-opt alone takes
# half a minute.
STAMP=$SITE.made-from
made_from="$WASM $(stat -c %Y.%s "$WASM")"
if [[ -f $SITE/pkg/slurmlens_web_bg.wasm.gz && $(cat "$STAMP" 2>/dev/null) == "$made_from" ]]; then
  log "site in $SITE already made from this build"
  exit 0
fi

log "wasm-bindgen $(wasm-bindgen --version | cut -d' ' -f2)"
mkdir -p "$SITE/pkg"
rm -f "$STAMP"
rm -f "$SITE"/pkg/slurmlens_web*
wasm-bindgen --target web --no-typescript --out-dir "$SITE/pkg" --out-name slurmlens_web "$WASM"

if [[ $PROFILE != dev ]]; then
  log "wasm-opt -Oz ($(wasm-opt --version))"
  wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    "$SITE/pkg/slurmlens_web_bg.wasm" -o "$SITE/pkg/slurmlens_web_bg.wasm"
fi
gzip -9 -k -f "$SITE/pkg/slurmlens_web_bg.wasm" "$SITE/pkg/slurmlens_web.js"
printf '%s\n' "$made_from" >"$STAMP"
size() { stat -c %s "$1"; }
log "site ready in $SITE: wasm $(size "$SITE/pkg/slurmlens_web_bg.wasm") B ($(size "$SITE/pkg/slurmlens_web_bg.wasm.gz") B gzip), js $(size "$SITE/pkg/slurmlens_web.js") B ($(size "$SITE/pkg/slurmlens_web.js.gz") B gzip)"
