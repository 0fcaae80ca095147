#!/usr/bin/env bash
# Creates .venv and installs trainctl with the runtime extra (torch) and test tools.
# torch is pinned: an unpinned `torch` resolves to a multi-GB CUDA build; 2.13.0 is the CPU wheel
# these machines serve. On a GPU host, install the CUDA build of torch yourself first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}" -e '.[runtime,dev,notify,prometheus,report]' 2>&1 | grep -v 'is ignored' || true
.venv/bin/python -c 'import trainctl.cli.app, torch' || { echo "setup failed: trainctl or torch did not import" >&2; exit 1; }
