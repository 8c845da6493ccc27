#!/usr/bin/env bash
# Print a folder on tmpfs for the tests' temporary files, or nothing to leave TMPDIR as it is.
# On this project's 2-core VM the tests' git repositories on the virtual disk cost 2-3x the kernel time
# they cost on tmpfs (git writes many small files). A run writes ~0.3 GiB and pytest keeps the last
# three runs, so /dev/shm is used only with 4 GiB free; the folder must be ours and not a link (/dev/shm
# is shared by every user of the machine).
set -u
shm=${FORKCTL_TEST_SHM:-/dev/shm}  # another folder only for tests/test_test_plan.py
[ -d "$shm" ] && [ -w "$shm" ] || exit 0
free_kib=$(df -Pk "$shm" 2>/dev/null | awk 'NR == 2 {print $4}')
[ -n "$free_kib" ] && [ "$free_kib" -gt 4194304 ] || exit 0
dir="$shm/forkctl-tests-$(id -u)"
[ -d "$dir" ] || mkdir -m 700 "$dir" 2>/dev/null || exit 0
[ -d "$dir" ] && [ ! -L "$dir" ] && [ -O "$dir" ] || exit 0
# Some systems mount /dev/shm noexec; the tests run programs they write (a fake gh, git hooks).
probe="$dir/.exec-probe"
printf '#!/bin/sh\nexit 0\n' >"$probe" && chmod +x "$probe" && "$probe" 2>/dev/null || exit 0
echo "$dir"
