#!/usr/bin/env bash
# Regenerate tests/slow-tests.txt: the tests `make test-fast` leaves to `make test`, those that took over
# SECONDS (default 0.8; setup + call + teardown) in a run of the fast loop on this machine, added to those
# listed (timings vary from run to run; remove a line by hand when its test got faster).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-0.8}
durations=$(mktemp)
trap 'rm -f "$durations"' EXIT
# The listed tests run too (FORKCTL_MEASURE_SLOW: the plugin ignores the list), so each is judged again.
FORKCTL_MEASURE_SLOW=1 .venv/bin/python -m pytest -q -p tests.make_test_plugin -m "not slow" -n 4 \
    --durations=0 -p no:cacheprovider > "$durations" || true
{
    sed -n '1,4p' tests/slow-tests.txt  # the header
    # `0.91s call tests/x.py::test_y[p]`: seconds per test, summed over its phases, parameters dropped.
    grep -E '^[0-9.]+s (setup|call|teardown) ' "$durations" |
        awk '{t[$3] += $1} END {for (k in t) print t[k], k}' |
        awk -v s="$seconds" '$1 > s {print $2}' | sed 's/\[.*$//' |
        cat - <(grep -v '^#' tests/slow-tests.txt) | sort -u  # the union: one run's timings vary
} > tests/slow-tests.txt.new
mv tests/slow-tests.txt.new tests/slow-tests.txt
echo "tests/slow-tests.txt: $(grep -vc '^#' tests/slow-tests.txt) tests over ${seconds} s"
