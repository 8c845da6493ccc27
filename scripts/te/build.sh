#!/bin/bash
# On the GPU machine (see README.md here): join the carried parts of the TE core wheel, install TE and its
# needs into /tmp/site, build transformer_engine_torch from its sdist and keep its wheel in $OUT.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.." || exit 2
WHEEL=transformer_engine_cu13-2.20.2-py3-none-manylinux_2_28_x86_64.whl
SHA=30063d3699e779cce63617c3458804f7a504ce8279f2749c98313db9daae273e
cat /tmp/te/p0 /tmp/te/p1 /tmp/te/p2 /tmp/te/p3 /tmp/te/p4 .te/p5 > "/tmp/te/$WHEEL"
echo "$SHA  /tmp/te/$WHEEL" | sha256sum -c || exit 1
built=$(ls .whl/transformer_engine_torch-*.whl 2>/dev/null)
small=$(ls .whl/*.whl | grep -v transformer_engine_torch)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    "/tmp/te/$WHEEL" $small || exit 1
export PYTHONPATH=/tmp/site
if [ -n "$built" ]; then  # a wheel an earlier call built and brought back: no build this time
    python3 -m zipfile -e "$built" /tmp/site
    python3 -c "import transformer_engine, transformer_engine.pytorch; print('TE', transformer_engine.__version__)"
    exit 0
fi
mkdir -p /tmp/tebuild && tar xzf .whl/transformer_engine_torch-2.20.2.tar.gz -C /tmp/tebuild
start=$(date +%s)
(cd /tmp/tebuild/transformer_engine_torch-2.20.2 &&
    NVTE_PYTORCH_FORCE_BUILD=TRUE NVTE_CUDA_ARCHS=90 MAX_JOBS=16 timeout 330 \
    python3 -m pip wheel --no-build-isolation --no-deps --no-index -w /tmp/tewheel . > "$OUT/te_build.log" 2>&1)
echo "build exit $? in $(($(date +%s) - start)) s"
cp /tmp/tewheel/*.whl "$OUT/"
# Unzipped, not pip-installed: pip --target refuses to add to the transformer_engine folder the core made.
python3 -m zipfile -e /tmp/tewheel/*.whl /tmp/site
python3 -c "import transformer_engine, transformer_engine.pytorch; print('TE', transformer_engine.__version__)"
