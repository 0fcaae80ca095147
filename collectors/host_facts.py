"""Host facts: kernel, driver, CUDA, NCCL, torch and Python versions, GPU model and count.

One command printing `key=value` lines (nvidia-smi where present; torch from the given Python),
and a pure parser into one host_facts row. A host without GPUs gives null GPU columns and count 0.
"""

from __future__ import annotations

import shlex
from typing import Any

__all__ = ["command", "parse"]

_PY = (
    "import platform\n"
    "print('python=' + platform.python_version())\n"
    "try:\n"
    "    import torch\n"
    "    print('torch=' + torch.__version__)\n"
    "    print('torch_cuda=' + str(torch.version.cuda))\n"
    "    v = torch.cuda.nccl.version() if torch.cuda.is_available() else None\n"
    "    print('nccl=' + ('.'.join(map(str, v)) if isinstance(v, tuple) else str(v)))\n"
    "except Exception:\n"
    "    pass\n"
)


def command(python: str = "python3") -> str:
    return (
        'echo "kernel=$(uname -r)"\n'
        "if command -v nvidia-smi >/dev/null 2>&1; then "
        "nvidia-smi --query-gpu=driver_version,name --format=csv,noheader 2>/dev/null | sed 's/^/gpu=/'; "
        "nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | sed 's/CUDA Version: /cuda_driver=/'; fi\n"
        f"{shlex.quote(python)} -c {shlex.quote(_PY)} 2>/dev/null; exit 0"
    )


def parse(output: str) -> dict[str, Any]:
    """One host_facts row (without collected_ts); unknown values are None."""
    kv: dict[str, str] = {}
    gpus: list[tuple[str, str]] = []
    for line in output.splitlines():
        key, sep, val = line.partition("=")
        if not sep:
            continue
        if key == "gpu":
            driver, _, model = val.partition(",")
            gpus.append((driver.strip(), model.strip()))
        else:
            kv[key.strip()] = val.strip()

    def v(k: str) -> str | None:
        x = kv.get(k)
        return None if x in (None, "", "None") else x

    models = sorted({m for _, m in gpus})
    return {
        "kernel": v("kernel"),
        "driver_version": gpus[0][0] if gpus else None,
        "cuda_version": v("cuda_driver") or v("torch_cuda"),
        "nccl_version": v("nccl"),
        "torch_version": v("torch"),
        "python_version": v("python"),
        "gpu_model": ", ".join(models) if models else None,
        "gpu_count": len(gpus),
    }
