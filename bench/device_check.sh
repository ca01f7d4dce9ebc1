#!/usr/bin/env bash
# One prepared run for a machine with a CUDA GPU (issue 10's figures), printing everything the
# docs quote: the statistics tests on the GPU (Triton kernels compiled, eager fused path, one
# sync per step, side stream), then the benchmark on the four workloads with ops and syncs per
# step (30 rounds: the side-stream rows compare end-to-end times).
#   bash bench/device_check.sh            # about 5-8 minutes on an H200
# Needs torch with CUDA, numpy, numba, networkx, transformers (for gpt2); no Qt, no network.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
try:
    import triton
    print("triton", triton.__version__)
except Exception as exc:  # noqa: BLE001
    print("no triton:", exc)
PY
timeout 240 python -m pytest -q -p no:qt -p no:cacheprovider tests/test_stats_cuda.py tests/test_stats_side_stream.py \
    tests/test_stats_triton.py tests/test_stats_exactness.py tests/test_stats_op_count.py 2>&1 | tail -25
timeout 420 python bench/histograms.py --device cuda --rounds 30 \
    --models resnet18,transformer,gpt2,resnet18-224 2>&1
