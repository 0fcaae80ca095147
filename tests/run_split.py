"""Split a local run dir into what each host of it would hold (for collect tests over SSH and kubectl)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from trainctl.rundir import read_run_info

# Flat per-rank folders (INTERFACES.md): the file of rank R lives on the host that runs rank R.
RANK_DIRS = ("ranks", "heartbeats", "errors")


def split_by_host(run_dir: Path, cluster, remote_run: Path) -> dict[str, list[str]]:
    """Copy each host's part of a local run dir to that test host (an sshd host or a pod: anything
    with `host_root(name)` and `remote_root`); returns host -> files placed.

    Only what the host itself would hold: run.json, `X/host=H/...` and `X/H/...`, and
    ranks|heartbeats|errors files of its own ranks. Nothing of another host, nothing launcher-wide
    (hang_dumps.json).
    """
    info = read_run_info(run_dir)
    host_of_rank = {r: h.host for h in info.hosts for r in h.ranks}
    placed: dict[str, list[str]] = {h.host: [] for h in info.hosts}
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(run_dir)
        comps = rel.parts
        owners: list[str] = []
        if rel.as_posix() == "run.json":
            owners = list(placed)
        elif len(comps) == 2 and comps[0] in RANK_DIRS and (m := re.fullmatch(r"rank-(\d+)\.json", comps[1])):
            owners = [host_of_rank[int(m.group(1))]]
        elif len(comps) >= 3:
            owners = [h for h in placed if comps[1] in (h, f"host={h}")]
        for h in owners:
            dest = cluster.host_root(h) / remote_run.relative_to(cluster.remote_root) / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
            placed[h].append(rel.as_posix())
    return placed
