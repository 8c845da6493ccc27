#!/usr/bin/env bash
# Install what tests/test_mermaid_render.py renders forkctl's Mermaid diagrams with: Debian's chromium
# (apt) and mermaid-cli (npm, pinned) under .tools/mermaid, pointed at that system browser (puppeteer is
# told to download no browser of its own). Safe to run again: it does nothing when both are in place.
# `make test` runs it (CI renders every diagram); it adds a browser (~0.3 GiB) and node modules (~0.5 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."

MERMAID_CLI_VERSION="12.2.0"
prefix=.tools/mermaid

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "mermaid-setup: error: chromium is missing; install it as root: apt-get install chromium" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "mermaid-setup: error: npm is missing; install it as root: apt-get install npm" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

installed="$prefix/node_modules/@mermaid-js/mermaid-cli/package.json"
if [ ! -x "$prefix/node_modules/.bin/mmdc" ] || ! grep -q "\"version\": \"$MERMAID_CLI_VERSION\"" "$installed"; then
    mkdir -p "$prefix"
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$prefix" --no-audit --no-fund --silent \
        "@mermaid-js/mermaid-cli@$MERMAID_CLI_VERSION"
fi
echo "mermaid-cli $MERMAID_CLI_VERSION: $prefix/node_modules/.bin/mmdc; browser: $(command -v chromium)"
