#!/usr/bin/env bash
# The CLI installs and runs on Python 3.10-3.13: its own tests, run under every other such Python this
# machine has, each a pytest session of its own (`make test` calls this after the main suite, which is
# Python 3.12's). Offline: scripts/bootstrap.sh (`make setup`) built `.venv-pythons/<version>` with the
# locked dependencies; each run has this checkout's `forkctl` first on its path.
#
# Only the patch tests need 3.12 (megatron-core 0.19.2); the CLI needs click, msgspec, PyYAML and rich.
# The oldest other Python runs the CLI set: every verb's entry and the error contract, the manifest, series
# reading, apply and export on real repositories, a bump through the chain with its check, and a
# consumer's CI (the commit under test judged alone, the action's steps run as the examples do). Of the
# chain's test files only the tests of those paths (the main suite runs the rest); nothing imports torch.
# The newer ones run the entry set: code that runs on the oldest and on 3.12 can break on a newer Python
# only where it removed or changed something, which shows on import (every verb is imported there) or in
# parsing; the full set costs 20 s of CPU per Python on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

under_test=tests/test_check_pins_under_test.py::test_a_nemo_commit_pinning
entry_tests=(
    tests/test_cli_startup.py
    tests/test_options.py
    tests/test_manifest.py
    tests/test_series.py
)
cli_tests=(
    "${entry_tests[@]}"
    tests/test_lint_status.py
    tests/test_apply.py
    tests/test_export.py
    tests/test_bump_bridge.py::test_bump_through_nemo_rl_then_check_pins_passes
    "${under_test}_a_good_bridge_passes_though_the_bridge_branch_is_broken"
    "${under_test}_a_failing_bridge_fails_on_its_own_finding"
    tests/test_action.py::test_the_examples_args_judge_the_commit_under_test
)
if [ "${1:-}" = --list ]; then  # what the runs cover (tests/test_pythons_script.py checks every name exists)
    printf '%s\n' "${cli_tests[@]}"
    exit 0
fi

# The same places scripts/bootstrap.sh looks; a version the machine lacks is not a failure.
# shellcheck source=/dev/null  # the function only, cut out of bootstrap.sh
source <(sed -n '/^find_python()/,/^}/p' scripts/bootstrap.sh)
present=()
for version in 3.10 3.11 3.13; do
    find_python "$version" >/dev/null && present+=("$version")
done
if [ ${#present[@]} = 0 ]; then
    echo "test-pythons: no Python 3.10, 3.11 or 3.13 on this machine: only 3.12's suite ran" >&2
    exit 0
fi

tmp=$(scripts/test-tmpdir.sh)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run_under() {  # run_under VERSION TESTS...: the tests, then which Python and which forkctl answered
    local version=$1 python=$root/.venv-pythons/$1/bin/python
    shift
    if [ ! -x "$python" ]; then
        echo "Python $version is here but has no CLI environment: run \`make setup\`"
        return 1
    fi
    # No PYTEST_* or GIT_* from the caller. Bytecode is written (tagged per version, so the Pythons never
    # share a .pyc): without it every forkctl process the tests start would compile forkctl again.
    local -a clean=(env -u PYTHONDONTWRITEBYTECODE)
    local name
    for name in $(compgen -e | grep -E '^(PYTEST_|GIT_)' || true); do clean+=(-u "$name"); done
    clean+=(PYTHONPATH="$root" FORKCTL_LOG_WIDTH=100000 ${tmp:+TMPDIR="$tmp"})  # see tests/make_test_plugin.py
    "${clean[@]}" "$python" -m pytest -q -p no:cacheprovider -x "$@" || return 1
    local seen
    seen=$("${clean[@]}" "$python" -c "import sys, forkctl; print('%d.%d' % sys.version_info[:2], forkctl.__file__)")
    case "$seen" in
        "$version $root/forkctl/"*) ;;
        *) echo "Python $version ran $seen, not this checkout's forkctl under $version"; return 1 ;;
    esac
}

# One session per Python, side by side (most of their time is spent waiting on git processes).
pids=()
for version in "${present[@]}"; do
    if [ "$version" = "${present[0]}" ]; then tests=("${cli_tests[@]}"); else tests=("${entry_tests[@]}"); fi
    run_under "$version" "${tests[@]}" >"$logs/$version" 2>&1 &
    pids+=($!)
done
failed=0
for index in "${!present[@]}"; do
    version=${present[$index]}
    if wait "${pids[$index]}"; then
        echo "test-pythons: Python $version: $(tail -n 1 "$logs/$version")"
    else
        failed=1
        echo "test-pythons: Python $version FAILED:" >&2
        tail -n 80 "$logs/$version" >&2
    fi
done
exit "$failed"
