#!/usr/bin/env bash
# Bring what tests/test_mermaid_render.py renders forkctl's Mermaid diagrams with, without root and
# without touching the system: Debian's chromium, its packages unpacked under .tools/chromium (`apt-get
# download` + `dpkg-deb -x`, both work as any user) behind a wrapper that points the loader at them,
# and mermaid-cli (npm, pinned) under .tools/mermaid, told to download no browser of its own. Safe to
# run again: it does nothing when both are in place.
#
# `make setup-mermaid` runs it and CI (.ci/run) runs that before `make test`; a plain `make test` does
# not (the browser and node modules are ~0.8 GiB and rendering costs about a minute), and the render
# tests then skip and say so. A chromium already on PATH is used as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

MERMAID_CLI_VERSION="12.2.0"
prefix=.tools/mermaid
browser=.tools/chromium

if command -v chromium >/dev/null 2>&1; then
    chromium=$(command -v chromium)
else
    chromium=$browser/chromium
    if [ ! -x "$chromium" ]; then
        # What `apt-get install chromium` would add to this system, as a simulation (no root needed).
        if ! packages=$(apt-get -s -qq install --no-install-recommends chromium 2>/dev/null | awk '/^Inst /{print $2}') ||
            [ -z "$packages" ]; then
            echo "mermaid-setup: error: apt cannot find chromium (no Debian package lists here?)" >&2
            echo "  Fix: apt-get update (as root), or put a chromium on PATH" >&2
            exit 1
        fi
        rm -rf "$browser.partial" && mkdir -p "$browser.partial/debs"
        # shellcheck disable=SC2086  # one package name per word
        (cd "$browser.partial/debs" && apt-get download -qq $packages)
        for deb in "$browser.partial"/debs/*.deb; do
            dpkg-deb -x "$deb" "$browser.partial/root"
        done
        rm -rf "$browser.partial/debs"
        cat >"$browser.partial/chromium" <<'WRAPPER'
#!/bin/sh
# Debian's chromium unpacked here by scripts/mermaid-setup.sh: its libraries come from here first.
root=$(dirname "$(readlink -f "$0")")/root
lib=$root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$lib:$lib/pulseaudio:$root/usr/lib/chromium${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$root/usr/lib/chromium/chromium" "$@"
WRAPPER
        chmod +x "$browser.partial/chromium"
        rm -rf "$browser" && mv "$browser.partial" "$browser"
    fi
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "mermaid-setup: error: npm is missing; it installs mermaid-cli" >&2
    echo "  Fix: apt-get install npm (as root), or put a node and npm on PATH" >&2
    exit 1
fi

installed="$prefix/node_modules/@mermaid-js/mermaid-cli/package.json"
if [ ! -x "$prefix/node_modules/.bin/mmdc" ] || ! grep -q "\"version\": \"$MERMAID_CLI_VERSION\"" "$installed"; then
    mkdir -p "$prefix"
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$prefix" --no-audit --no-fund --silent \
        "@mermaid-js/mermaid-cli@$MERMAID_CLI_VERSION"
fi
"$chromium" --headless --no-sandbox --disable-gpu --dump-dom 'data:text/html,<p>ok</p>' 2>/dev/null |
    grep -q '<p>ok</p>' || {
    echo "mermaid-setup: error: $chromium does not start headless" >&2
    exit 1
}
echo "mermaid-cli $MERMAID_CLI_VERSION: $prefix/node_modules/.bin/mmdc; browser: $chromium"
