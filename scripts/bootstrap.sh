#!/usr/bin/env bash
# Set up forkctl's environment on a fresh machine: find a Python 3.12 without downloading one, get uv,
# and install the locked environment (uv.lock) into .venv. Safe to run again: it does nothing new
# when everything is in place.
#
#   scripts/bootstrap.sh                     .venv (tests, lint, validate: torch on CPU included), the
#                                            other Pythons' venvs and .wheelhouse/ (`make setup`)
#   scripts/bootstrap.sh demo                .venv-demo: forkctl and megatron-core's files only (`make demo`)
#   scripts/bootstrap.sh demo-requirements   print what `demo` installs (read from uv.lock, offline)
#
# The demo copies megatron-core's files into a synthetic upstream and never imports them, so its venv
# holds forkctl's locked runtime dependencies and the locked megatron-core wheel without its
# dependencies (torch, triton, numpy: 4.6 GB of CUDA libraries that PyPI serves for Linux).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-full}
case "$MODE" in
    full | demo | demo-requirements) ;;
    *)
        echo "bootstrap: error: unknown mode '$MODE'" >&2
        echo "  Fix: scripts/bootstrap.sh [demo | demo-requirements] (no argument: the full environment)" >&2
        exit 2
        ;;
esac

UV_VERSION="0.13.9"

# find_python 3.N: the first interpreter of exactly that version among the usual places (never downloaded).
find_python() {
    local version=$1 candidate
    for candidate in \
        "$( [ "$version" = 3.12 ] && echo "${FORKCTL_PYTHON:-}" )" \
        "$(command -v "python$version" 2>/dev/null || true)" \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python"$version" \
        /root/.pyenv/versions/"$version".*/bin/python"$version" \
        /usr/local/bin/python"$version" /usr/bin/python"$version" /opt/python"$version"/bin/python"$version"; do
        [ -n "$candidate" ] && [ -x "$candidate" ] || continue
        if "$candidate" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$version' else 1)" 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if ! PYTHON=$(find_python 3.12); then
    cat >&2 <<'MSG'
bootstrap: error: no Python 3.12 found.
  forkctl needs Python 3.12 (megatron-core 0.19.2 requires >= 3.12) and does not download one.
  Looked at: $FORKCTL_PYTHON, python3.12 on PATH, ~/.pyenv/versions/3.12*/bin/python3.12,
  /usr/local/bin/python3.12, /usr/bin/python3.12.
  Fix: install it (e.g. `pyenv install 3.12` or `apt-get install python3.12 python3.12-venv`),
  or point FORKCTL_PYTHON at an existing python3.12 binary.
MSG
    exit 2
fi

# uv: use one on PATH if it is there, else install the pinned version into a private tool venv.
if command -v uv >/dev/null 2>&1; then
    UV=$(command -v uv)
else
    UV=.tools/bin/uv
    if [ ! -x "$UV" ]; then
        echo "bootstrap: installing uv $UV_VERSION into .tools/ (with $PYTHON)" >&2
        "$PYTHON" -m venv .tools
        .tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
    fi
fi

export UV_PYTHON_DOWNLOADS=never
# uv trusts its own root certificates unless told otherwise; behind a TLS-inspecting proxy only the
# system bundle works, so point it there when nothing else was set.
if [ -z "${SSL_CERT_FILE:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
fi
# demo_requirements: the demo's pinned requirements with their hashes, from uv.lock alone (--frozen: no
# resolution, no network): forkctl's runtime closure, then megatron-core's own entry of the patchtest
# group without the packages it depends on.
demo_requirements() {
    "$UV" export --frozen --no-dev --no-default-groups --no-emit-project --quiet
    "$UV" export --frozen --only-group patchtest --no-emit-project --quiet |
        awk '/^[^ ]/ { keep = ($0 ~ /^megatron-core==/) } keep'
}
if [ "$MODE" = demo-requirements ]; then
    demo_requirements
    exit 0
fi
echo "bootstrap: python $("$PYTHON" -c 'import platform; print(platform.python_version())') at $PYTHON; $("$UV" --version)" >&2
if [ "$MODE" = demo ]; then
    DEMO=.venv-demo
    if [ ! -f "$DEMO/.stamp" ] || [ uv.lock -nt "$DEMO/.stamp" ] || [ pyproject.toml -nt "$DEMO/.stamp" ]; then
        echo "bootstrap: installing forkctl and megatron-core's files (no torch) into $DEMO" >&2
        rm -rf "$DEMO"
        "$UV" venv --quiet --python "$PYTHON" "$DEMO"
        demo_requirements >"$DEMO/requirements.txt"
        "$UV" pip install --quiet --python "$DEMO/bin/python" --no-deps --require-hashes -r "$DEMO/requirements.txt"
        "$UV" pip install --quiet --python "$DEMO/bin/python" --no-deps --editable .
        touch "$DEMO/.stamp"
    fi
    echo "bootstrap: demo environment ready in $DEMO" >&2
    exit 0
fi
# Bytecode is compiled at set-up: machines that set PYTHONDONTWRITEBYTECODE (CI images often do) would
# otherwise compile every imported module on every run, which costs forkctl half a second a start.
# Compiling all of site-packages takes ~30 s (torch), so it runs when the lock changed, not each time.
STAMP=.venv/.forkctl-bytecode
if [ ! -f "$STAMP" ] || [ uv.lock -nt "$STAMP" ]; then
    echo "bootstrap: installing the locked environment and compiling its bytecode (once per lock)" >&2
    "$UV" sync --frozen --python "$PYTHON" --quiet --compile-bytecode
    touch "$STAMP"
else
    "$UV" sync --frozen --python "$PYTHON" --quiet
fi
.venv/bin/python -m compileall -q forkctl >/dev/null

# The CLI installs on Python 3.10-3.13 (only the patch tests need 3.12). scripts/test-pythons.sh runs the
# CLI's own tests under every other such Python this machine has, each in a small venv holding the
# locked runtime dependencies and the dev tools, built here once per lock.
for version in 3.10 3.11 3.13; do
    other=$(find_python "$version") || continue
    dir=.venv-pythons/$version
    if [ ! -f "$dir/.stamp" ] || [ uv.lock -nt "$dir/.stamp" ]; then
        echo "bootstrap: Python $version at $other: installing the CLI's locked dependencies into $dir" >&2
        rm -rf "$dir"
        "$UV" venv --quiet --python "$other" "$dir"
        "$UV" export --frozen --no-hashes --no-emit-project --no-default-groups --group dev --quiet \
            >"$dir/requirements.txt"
        "$UV" pip install --quiet --python "$dir/bin/python" --compile-bytecode -r "$dir/requirements.txt"
        touch "$dir/.stamp"
    fi
done

# .wheelhouse/: the CLI's locked wheels (no dev or patch-test group) for Python 3.10-3.13, the build
# backend (and `editables`, for an editable install) and the demo's megatron-core wheel, downloaded once
# per lock (or per change of this script) while the network is there.
# pre-commit builds a hook's virtualenv with pip; tests/test_hook.py points pip at this folder
# (PIP_NO_INDEX=1, PIP_FIND_LINKS) so the forkctl-check-pins hook installs offline, and
# tests/test_demo_env.py builds the demo's venv from it. Best effort: without the network those tests skip.
if [ ! -f .wheelhouse/.stamp ] || [ uv.lock -nt .wheelhouse/.stamp ] || [ "$0" -nt .wheelhouse/.stamp ]; then
    echo "bootstrap: downloading the CLI's locked wheels into .wheelhouse/" >&2
    rm -rf .wheelhouse && mkdir -p .wheelhouse
    "$UV" export --frozen --no-dev --no-default-groups --no-emit-project --quiet -o .wheelhouse/requirements.txt
    ok=1
    for version in 3.10 3.11 3.12 3.13; do
        "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
            --python-version "$version" -r .wheelhouse/requirements.txt -d .wheelhouse 2>/dev/null || ok=0
    done
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: "hatchling>=1.24" \
        "editables>=0.3" -d .wheelhouse 2>/dev/null || ok=0
    demo_requirements >.wheelhouse/demo-requirements.txt
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
        --python-version 3.12 -r .wheelhouse/demo-requirements.txt -d .wheelhouse 2>/dev/null || ok=0
    if [ "$ok" = 1 ]; then touch .wheelhouse/.stamp; else echo "bootstrap: .wheelhouse/ incomplete (no network?)" >&2; fi
fi
echo "bootstrap: environment ready in .venv" >&2
