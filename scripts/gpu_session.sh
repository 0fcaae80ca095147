#!/usr/bin/env bash
# The GPU suite on a borrowed GPU machine whose image already has CUDA torch but no network (the
# workplace's device tool): installs trainctl's missing dependencies from wheels carried in .whl/
# (see BENCHMARKS.md, "GPU suite", for how they were downloaded), installs trainctl itself, prints
# what the machine is, runs tests/gpu and leaves in $OUT the log and the run dirs (real NCCL Flight
# Recorder dumps and NCCL logs, kept as recorded data). On a GPU machine with network, use
# `bash scripts/test.sh --gpu` instead.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
fi
# The wheel maps collectors/ analyzers/ runtime/ playbooks/ under trainctl (pyproject's package-dir).
if ! "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/tc .; then
  mkdir -p /tmp/tc && cp -r trainctl /tmp/tc/ && for p in collectors analyzers runtime playbooks; do cp -r "$p" /tmp/tc/trainctl/; done
fi
export PYTHONPATH=/tmp/tc:/tmp/site PATH=/tmp/site/bin:$PATH
"$PY" - <<'EOF'
import torch, trainctl
print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count(), "trainctl", trainctl.__version__)
import torch._C._distributed_c10d as c10d
print("worker-server handlers:", sorted(c10d._get_handler_names()) if hasattr(c10d, "_get_handler_names") else "n/a")
EOF
# From outside the checkout: its trainctl/ folder (without collectors/ etc. under it) must not
# shadow the installed package, in pytest or in the CLI processes the tests start.
REPO=$(pwd)
cd /tmp
timeout "${GPU_SUITE_TIMEOUT_S:-420}" "$PY" -m pytest "$REPO/tests/gpu" -c "$REPO/pyproject.toml" --rootdir "$REPO" \
  -m gpu -p no:cacheprovider -v -rA --basetemp=/tmp/gpu_runs "$@" 2>&1 | tee "$OUT/gpu_suite.log"
rc=${PIPESTATUS[0]}
# The run dirs minus checkpoints and sockets: the recorded NCCL-format data.
tar czf "$OUT/gpu_runs.tgz" -C /tmp --exclude='*.pt' --exclude='checkpoints' --exclude='*.sock' gpu_runs 2>/dev/null
echo "gpu suite rc=$rc"
exit "$rc"
