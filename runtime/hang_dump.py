"""Dump a hung run's evidence on the host where its ranks run: Flight Recorder and Python stacks.

Per rank: the CPU recorder (`fr/<host>/rank-R.json` and `.pkl`), on a CUDA build also the NCCL
recorder, where ProcessGroupNCCL's collectives are (`fr/<host>/nccl-rank-R.json` and `.pkl`, from
the `dump_nccl_trace_json` / `dump_nccl_trace_pickle` handlers), and the Python stacks
(`stacks/<host>/rank-R.txt`, plus `rank-R.pyspy.txt` with py-spy). `diagnose` merges the two
recorders of a rank, and reads the NCCL watchdog's own `nccl_trace_rank_R` there too
(trainctl.runtime.nccl_env points it into fr/<host>/).

Runs on the training host (its ranks' debug sockets are local there): the local launcher calls
`dump_hung_ranks` directly, the multi-host supervisor and playbooks run `python -m
trainctl.runtime.hang_dump RUN_DIR` on each host over SSH, which prints "OK TOTAL".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainctl.rundir import fr_dump_dir, read_rank_files, stacks_dir, worker_socket_path
from trainctl.runtime import debug_server

__all__ = ["dump_hung_ranks", "main"]


def _pyspy() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    cand = Path(sys.executable).with_name("py-spy")
    return str(cand) if cand.is_file() else None


def dump_hung_ranks(
    run_dir: Path,
    ranks: Mapping[int, dict],
    *,
    timeout_s: float = 20.0,
    nccl: bool | None = None,
    status_name: str = "hang_dumps.json",
) -> dict[str, str]:
    """Save every rank's Flight Recorder (json + pickle, both recorders on CUDA builds) and Python
    stacks, in parallel.

    nccl: ask for the NCCL recorder too; default: when this torch build has ProcessGroupNCCL
    (debug_server.nccl_recorder_available).
    Returns {artefact path: "ok" or why it is missing}; a dead rank's missing dump is itself
    evidence for the hang analyzer, so failures are recorded, never raised.
    """
    if nccl is None:
        nccl = debug_server.nccl_recorder_available()
    pyspy = _pyspy()
    jobs: list[tuple[Path, Callable[[], bytes]]] = []
    for rank, info in sorted(ranks.items()):
        host = str(info.get("host"))
        sock = worker_socket_path(run_dir, rank)
        fr_dir, st_dir = fr_dump_dir(run_dir, host), stacks_dir(run_dir, host)

        def req(handler: str, sock: Path = sock) -> Callable[[], bytes]:
            return lambda: debug_server.request(sock, handler, timeout_s=timeout_s)

        jobs += [
            (fr_dir / f"rank-{rank}.json", req(debug_server.CPU_FR_JSON)),
            (fr_dir / f"rank-{rank}.pkl", req(debug_server.CPU_FR_PICKLE)),
            (st_dir / f"rank-{rank}.txt", req(debug_server.STACKS)),
        ]
        if nccl:
            # JSON needs no GIL; the pickle symbolizes Python stacks and may wait for it.
            jobs += [
                (fr_dir / f"nccl-rank-{rank}.json", req(debug_server.NCCL_FR_JSON)),
                (fr_dir / f"nccl-rank-{rank}.pkl", req(debug_server.NCCL_FR_PICKLE)),
            ]
        if pyspy and info.get("pid"):

            def spy(pid: int = int(info["pid"])) -> bytes:
                p = subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, timeout=timeout_s)
                if p.returncode != 0:
                    raise OSError(p.stderr.decode(errors="replace").strip()[:300] or f"py-spy exited {p.returncode}")
                return p.stdout

            jobs.append((st_dir / f"rank-{rank}.pyspy.txt", spy))

    def run(job: tuple[Path, Callable[[], bytes]]) -> tuple[str, str]:
        path, fetch = job
        try:
            body = fetch()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(body)
            os.replace(tmp, path)
            return str(path), "ok"
        except (OSError, subprocess.SubprocessError) as exc:
            return str(path), f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=min(16, max(1, len(jobs)))) as pool:
        results = dict(pool.map(run, jobs))
    status_path = run_dir / status_name  # outside fr/: only dumps live there
    status_path.parent.mkdir(parents=True, exist_ok=True)
    status_path.write_text(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> None:
    """`python -m trainctl.runtime.hang_dump RUN_DIR [HOST]`: dump the ranks of RUN_DIR, print "OK TOTAL".

    With HOST (what the launchers pass), only the ranks whose rank file names that host: a run dir
    on a shared file system holds every host's rank files, and another machine's pid means nothing
    here. The status then goes to hang_dumps.<HOST>.json, so hosts sharing the dir do not overwrite
    each other's.
    """
    args = argv if argv is not None else sys.argv[1:]
    run_dir = Path(args[0])
    host = args[1] if len(args) > 1 else None
    ranks = read_rank_files(run_dir)
    if host is not None:
        ranks = {r: info for r, info in ranks.items() if str(info.get("host")) == host}
    results = dump_hung_ranks(run_dir, ranks, status_name=f"hang_dumps.{host}.json" if host else "hang_dumps.json")
    print(sum(v == "ok" for v in results.values()), len(results))


if __name__ == "__main__":
    main()
