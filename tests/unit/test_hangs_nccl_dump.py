"""The hang dump asks a CUDA build's worker server for the NCCL recorder; launch points the NCCL
watchdog's own dump into the run dir.

The worker server here is torch's real `_WorkerServer` on a Unix socket. This machine runs the CPU
wheel, which has no ProcessGroupNCCL: two things are faked, at the CUDA boundary only, and said so
where they are: `debug_server.nccl_recorder_available()` (is this a build with ProcessGroupNCCL?)
answers True, and the two handlers a CUDA build registers (FlightRecorderCuda.cpp:
`dump_nccl_trace_json`, `dump_nccl_trace_pickle`) are registered under those names, serving a dump
in the NCCL recorder's format (tests/fixtures/hangs/fr_job.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainctl.collectors import flight_recorder as fr
from trainctl.runtime import debug_server, hang_dump, nccl_env

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hangs"
sys.path.insert(0, str(FIXTURES))
import fr_job as J  # noqa: E402

TORCH = Path(__import__("torch").__file__).parent
C10D_HEADERS = TORCH / "include" / "torch" / "csrc" / "distributed" / "c10d"


def _nccl_dump() -> J.Job:
    groups = [J.Group("0", "default_pg", (0, 1))]
    return J.Job(2, groups, {0: [J.Op("0", "all_reduce")] * 2, 1: [J.Op("0", "all_reduce")] * 1}).run()


# A stand-in rank in its own process (handlers registered from Python must not outlive the
# interpreter that owns them, so never in the test process): torch's real worker server, started
# by the runtime, plus - FAKED, this being the CPU wheel - the two handlers a CUDA build registers.
_RANK = """
import sys, time
from pathlib import Path
sys.path.insert(0, {fixtures!r})
import torch._C._distributed_c10d as c10d
import fr_job as J
from trainctl.runtime import debug_server

groups = [J.Group("0", "default_pg", (0, 1))]
job = J.Job(2, groups, {{0: [J.Op("0", "all_reduce")] * 2, 1: [J.Op("0", "all_reduce")]}}).run()
log = Path({log!r})

def nccl_json(req, resp):
    log.open("a").write("dump_nccl_trace_json\\n")
    resp.set_content(job.recorders[0].dump_json().decode(), "application/json")
    resp.set_status(200)

def nccl_pickle(req, resp):
    log.open("a").write("dump_nccl_trace_pickle\\n")
    resp.set_content(job.recorders[0].dump_pickle(), "application/octet-stream")
    resp.set_status(200)

if {fake!r}:
    assert "dump_nccl_trace_json" not in c10d._get_handler_names()  # else this is a CUDA build
    c10d._register_handler("dump_nccl_trace_json", nccl_json)
    c10d._register_handler("dump_nccl_trace_pickle", nccl_pickle)
if {fake_cuda!r}:
    # FAKED boundary (CPU wheel, no GPU): a CUDA build with NCCL, where the watchdog can dump.
    debug_server.nccl_recorder_available = lambda: True
    debug_server._cuda_available = lambda: True
server = debug_server.start({run!r}, 0)
Path({ready!r}).write_text("ok")
while True:
    time.sleep(0.2)
"""


@pytest.fixture
def rank0(tmp_path):
    """Start rank 0's worker server in a subprocess; yields (run dir, handler log)."""
    procs = []

    def start(fake_nccl: bool, env: dict | None = None, fake_cuda: bool = False) -> tuple[Path, Path]:
        run, log, ready = tmp_path / "run", tmp_path / "served.log", tmp_path / "ready"
        code = _RANK.format(
            fixtures=str(FIXTURES), log=str(log), fake=fake_nccl, run=str(run), ready=str(ready), fake_cuda=fake_cuda
        )
        procs.append(subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **(env or {})}))
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert procs[-1].poll() is None, "stand-in rank died"
            assert time.monotonic() < deadline
            time.sleep(0.1)
        return run, log

    yield start
    for p in procs:
        p.kill()
        p.wait(10)


def test_handler_names_are_the_ones_torch_serves_the_nccl_recorder_under() -> None:
    # torch's own debug frontend asks the worker servers for the NCCL recorder by this name.
    spec = importlib.util.find_spec("torch.distributed.debug._debug_handlers")
    assert spec is not None and spec.origin
    assert f'"{debug_server.NCCL_FR_JSON}"' in Path(spec.origin).read_text()
    assert debug_server.NCCL_FR_JSON == "dump_nccl_trace_json"
    # FlightRecorderCuda.cpp (pytorch/pytorch, torch 2.13): RegisterHandler dumpHandler{"dump_nccl_trace_pickle", ...}
    assert debug_server.NCCL_FR_PICKLE == "dump_nccl_trace_pickle"
    # ...and the CPU recorder's JSON handler is in this (CPU) build's server.
    import torch._C._distributed_c10d as c10d

    assert debug_server.CPU_FR_JSON in c10d._get_handler_names()


def test_hang_dump_asks_a_cuda_build_for_both_recorders_and_diagnose_merges_them(rank0, monkeypatch) -> None:
    run, served = rank0(fake_nccl=True)
    monkeypatch.setattr(debug_server, "nccl_recorder_available", lambda: True)  # FAKED: a CUDA build
    results = hang_dump.dump_hung_ranks(run, {0: {"host": "node01"}}, timeout_s=20)
    fr_dir = run / "fr" / "node01"
    for name in ("rank-0.json", "rank-0.pkl", "nccl-rank-0.json", "nccl-rank-0.pkl"):
        assert results[str(fr_dir / name)] == "ok", results
    assert sorted(served.read_text().split()) == ["dump_nccl_trace_json", "dump_nccl_trace_pickle"]
    dumps = fr.load_dumps(fr.find_dumps(run / "fr", max_depth=1), root=run / "fr")
    assert [(d.rank, d.recorder, d.host) for d in dumps] == [(0, "cpu", "node01"), (0, "nccl", "node01")]
    nccl = next(d for d in dumps if d.recorder == "nccl")
    assert nccl.fmt == "pickle" and nccl.comm_lib_version == J.NCCL_VERSION and len(nccl.entries) == 2
    assert {e["profiling_name"] for e in nccl.entries} == {"nccl:all_reduce"}


def test_hang_dump_does_not_ask_a_cpu_build_for_the_nccl_recorder(tmp_path, monkeypatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(debug_server, "nccl_recorder_available", lambda: False)  # this wheel, said plainly
    monkeypatch.setattr(debug_server, "request", lambda sock, handler, **kw: asked.append(handler) or b"{}")
    hang_dump.dump_hung_ranks(tmp_path, {0: {"host": "h"}, 1: {"host": "h"}})
    assert sorted(set(asked)) == ["dump_traceback", "fr_trace", "fr_trace_json"]
    assert debug_server.nccl_recorder_available() is False  # the real check on the CPU wheel


def test_launch_env_points_the_nccl_watchdog_dump_into_the_run_dir(tmp_path) -> None:
    env = nccl_env.flight_recorder_env(tmp_path, "node02")
    prefix = str(tmp_path / "fr" / "node02" / "nccl_trace_rank_")
    assert env == {
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_ENABLE_MONITORING": "1",
        "TORCH_FR_DUMP_TEMP_FILE": prefix,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix,
    }
    # A user's own setting (under either alias) is kept.
    mine = nccl_env.flight_recorder_env(tmp_path, "node02", {"TORCH_NCCL_TRACE_BUFFER_SIZE": "64", "PATH": "/bin"})
    assert "TORCH_FR_BUFFER_SIZE" not in mine and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in mine
    # The watchdog's writer opens <prefix><rank> with std::ofstream, which makes no folder.
    assert nccl_env.ensure_dump_dir(env) == tmp_path / "fr" / "node02" and (tmp_path / "fr" / "node02").is_dir()
    # <prefix><rank> is read as the NCCL recorder's dump of that rank.
    p = tmp_path / "fr" / "node02" / "nccl_trace_rank_3"
    p.write_bytes(_nccl_dump().recorders[1].dump_pickle())
    d = fr.load_dump(p, root=tmp_path / "fr")
    assert (d.rank, d.recorder, d.host) == (3, "nccl", "node02")


def test_the_variables_are_the_ones_torch_2_13_reads() -> None:
    fr_hpp = (C10D_HEADERS / "FlightRecorder.hpp").read_text()
    pg_hpp = (C10D_HEADERS / "ProcessGroupNCCL.hpp").read_text()
    assert '{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}' in fr_hpp
    for name in ("TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_ENABLE_MONITORING"):
        assert f'"{name}"' in pg_hpp
    # DebugInfoWriter::getWriter lives in libtorch_cpu (FlightRecorder.cpp): both prefix names.
    lib = next((TORCH / "lib").glob("libtorch_cpu.so*"))
    with open(lib, "rb") as f:
        data = f.read()
    assert b"TORCH_FR_DUMP_TEMP_FILE\x00" in data and b"TORCH_NCCL_DEBUG_INFO_TEMP_FILE\x00" in data


def test_debug_server_start_makes_the_watchdog_dump_folder(rank0, tmp_path) -> None:
    folder = tmp_path / "run" / "fr" / "node01"
    run, _ = rank0(fake_nccl=False, env={"TORCH_FR_DUMP_TEMP_FILE": str(folder / "nccl_trace_rank_")}, fake_cuda=True)
    assert folder.is_dir()
    body = debug_server.request(debug_server.socket_for(run, 0), "fr_trace_json", timeout_s=20)
    assert json.loads(body)["version"] == "2.10"


def test_a_cpu_rank_makes_no_watchdog_folder(rank0, tmp_path) -> None:
    # No NCCL here: an empty fr/<host>/ would read as "a dump was taken" (a dry run must leave none).
    folder = tmp_path / "run" / "fr" / "node01"
    rank0(fake_nccl=False, env={"TORCH_FR_DUMP_TEMP_FILE": str(folder / "nccl_trace_rank_")})
    assert not folder.exists()
