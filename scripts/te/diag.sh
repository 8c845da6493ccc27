#!/bin/bash
# On the GPU machine, after build.sh (TE in /tmp/site): the fork head built from the base archive
# (.te/base.tgz, `git archive --format=tar.gz <base> megatron tests`), and the tests that failed there with
# TE installed on 2026-12-06: the series' own test_torch_expert_backend.py and upstream's fused-ops test.
set -u
export PYTHONUNBUFFERED=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517
cd "$(dirname "$0")/../.." || exit 2
root=$PWD
mkdir -p /tmp/fh && tar xzf .te/base.tgz -C /tmp/fh && cd /tmp/fh && git init -q . &&
    git apply "$root"/patches/megatron-lm/*.patch || exit 1
export PYTHONPATH=/tmp/fh:/tmp/site
timeout 100 python3 -m pytest -p no:cacheprovider -x -q --tb=short \
    tests/unit_tests/transformer/moe/test_torch_expert_backend.py > "$OUT/diag1.log" 2>&1
tail -45 "$OUT/diag1.log"
timeout 60 python3 -m pytest -p no:cacheprovider -q --tb=short tests/unit_tests/transformer/moe/test_grouped_mlp.py \
    -k test_gpu_make_fused_ops_constructs_with_real_te > "$OUT/diag2.log" 2>&1
tail -25 "$OUT/diag2.log"
