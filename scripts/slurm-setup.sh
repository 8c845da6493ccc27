#!/usr/bin/env bash
# Bring Debian 12's Slurm 22.05 (slurmctld, slurmd, the client commands, the basic plugins) under
# .tools/slurm without root, for the tests that run `forkctl validate --launcher slurm` against a real
# one-node cluster (tests/slurmcluster.py starts and stops it per test). Nothing is installed into the
# system: the packages are fetched with `apt-get download` into .tools/slurm-debs and unpacked with
# `dpkg-deb -x`; libraries the host lacks (libhwloc15) come the same way.
#
# One byte-level change is made to the unpacked copy: slurmd starts each job's slurmstepd from the
# folder it was built for (/usr/sbin, compiled into libslurmfull.so), which a user cannot write. That
# string is replaced by "." (same length, NUL-padded), so slurmd runs ./slurmstepd from its working
# folder, where the test cluster links slurmstepd-wlm. Only the copy under .tools is changed.
#
# Safe to run again: it does nothing when the unpacked tree is in place. Prints the folder on success.
# Needs apt-get (with package lists, as Debian 12 images have) and dpkg-deb; exits 1 with a reason otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins libhwloc15)
WANT_VERSION="22.05."
prefix=.tools/slurm
debs=.tools/slurm-debs
ready="$prefix/.ready"
libdir=usr/lib/x86_64-linux-gnu

if [ -f "$ready" ]; then
    echo "slurm: $prefix ($(cat "$ready"))"
    exit 0
fi
for tool in apt-get dpkg-deb python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "slurm-setup: error: $tool is missing (Debian 12 or a derivative is needed to bring Slurm 22.05)" >&2
        exit 1
    fi
done

mkdir -p "$debs"
(cd "$debs" && apt-get download -q "${PACKAGES[@]}" >/dev/null 2>download.log) || {
    echo "slurm-setup: error: apt-get download failed:" >&2
    cat "$debs/download.log" >&2
    echo "(no package lists? as root: apt-get update)" >&2
    exit 1
}
version=$(dpkg-deb -f "$(ls "$debs"/slurmctld_*.deb | head -n 1)" Version)
case "$version" in
    "$WANT_VERSION"*) ;;
    *) echo "slurm-setup: error: apt offers slurmctld $version, not $WANT_VERSION*" >&2; exit 1 ;;
esac

staging=$(mktemp -d "$prefix.tmp.XXXXXX")
trap 'rm -rf "$staging"' EXIT
for package in "${PACKAGES[@]}"; do
    dpkg-deb -x "$(ls "$debs"/"${package}"_*.deb | head -n 1)" "$staging"
done

# slurmd's slurmstepd: from its working folder instead of /usr/sbin (see the header).
python3 - "$staging/$libdir/slurm-wlm/libslurmfull.so" <<'EOF'
import sys
path = sys.argv[1]
data = open(path, "rb").read()
old = b"\x00/usr/sbin\x00"
if data.count(old) != 1:
    sys.exit(f"slurm-setup: error: {path}: expected one /usr/sbin string, found {data.count(old)}")
open(path, "wb").write(data.replace(old, b"\x00." + b"\x00" * (len(old) - 2)))
EOF

export LD_LIBRARY_PATH="$PWD/$staging/$libdir/slurm-wlm:$PWD/$staging/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(for binary in "$staging"/usr/sbin/*-wlm "$staging"/usr/bin/s*; do ldd "$binary" | grep "not found" || true; done | sort -u)
if [ -n "$missing" ]; then
    echo "slurm-setup: error: libraries not found:" >&2
    echo "$missing" >&2
    exit 1
fi

rm -rf "$prefix"
mv "$staging" "$prefix"
trap - EXIT
echo "slurm $version" >"$ready"
echo "slurm: $prefix (slurm $version)"
