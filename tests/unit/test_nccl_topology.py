"""NCCL's INFO init lines (real excerpts across releases) -> nccl_procs/nccl_links -> findings,
and a run dir holding per-rank NCCL logs diagnosed end to end."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from trainctl.analyzers.nccl import analyze_nccl
from trainctl.collectors.nccl_topology import parse_nccl_lines, to_tables
from trainctl.findings import Category, FindingKind
from trainctl.rundir import HostRanks, RunInfo, nccl_log_path, write_run_info
from trainctl.runtime import nccl_env
from trainctl.schemas import SignalKind

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "nccl"))
from real_excerpts import EXCERPTS  # noqa: E402


def procs_of(name: str):
    return {(p.host_as_logged, p.pid): p for p in parse_nccl_lines(EXCERPTS[name][1].splitlines())}


def test_socket_job_links_and_shm_in_old_and_new_channel_formats() -> None:
    ps = procs_of("socket_job")
    assert sorted(ps) == [("node0", 13571), ("node0", 13572), ("node2", 22555)]
    sends = ps[("node0", 13571)].links
    assert [
        (x["channel"], x["src_rank"], x["dst_rank"], x["direction"], x["transport"], x["detail"]) for x in sends
    ] == [
        (0, 0, 1, "send", "NET", "Socket/0"),
        (1, 0, 1, "send", "NET", "Socket/0"),
    ]
    shm = ps[("node0", 13572)].links
    assert {(x["transport"], x["detail"], x["direction"]) for x in shm} == {("SHM", "direct/direct", None)}
    t = to_tables(ps.values(), host="node01")[SignalKind.NCCL_PROCS].to_pylist()
    # No "Using network" line: the network is what the NET links say.
    assert {r["pid"]: r["network"] for r in t} == {13571: "Socket", 13572: None, 22555: "Socket"}


def test_roce_job_network_version_and_devices() -> None:
    (p,) = procs_of("roce_job").values()
    assert p.network == "IB" and p.version == "2.19.3+cuda12.3"  # the bare version line, one process in the text
    row = to_tables([p], host=None)[SignalKind.NCCL_PROCS].to_pylist()[0]
    assert row["host"] == "dgxh100-4"  # a pasted log keeps NCCL's own host name
    assert row["net_devices"] == "IB: [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>"


def test_old_release_lists_both_transports_and_keeps_the_chosen_one() -> None:
    (p,) = procs_of("ib_24").values()
    assert p.version == "2.4.7+cuda10.0" and p.network is None
    assert set(p.net_devices) == {"Socket", "IB"}
    # Without "Using network", the last transport NCCL listed (IB's, after the bootstrap socket).
    assert to_tables([p], host="n")[SignalKind.NCCL_PROCS].to_pylist()[0]["net_devices"].startswith("IB: [0]mlx5_0")


def test_rings_of_nccl_25_and_bus_ids() -> None:
    p = procs_of("rings_25")[("crow-ib-new-nccl-256-info-19", 5330)]
    assert [(x["src_rank"], x["dst_rank"], x["transport"], x["detail"]) for x in p.links] == [
        (155, 157, "P2P", "IPC"),
        (155, 153, "P2P", "IPC"),
    ]


def test_p2p_read_and_socket_on_one_host() -> None:
    ps = procs_of("p2p_and_socket")
    assert [x["detail"] for x in ps[("<cluster_name>", 919)].links] == ["IPC/read", "IPC/read"]
    assert {x["detail"] for x in ps[("<cluster_name>", 926)].links} == {"Socket/3"}


# ----------------------------------------------------------------------- the analyzer


# Per-rank NCCL files as NCCL writes them (format strings of NVIDIA/nccl src/init.cc,
# src/transport/net.cc, src/transport/p2p.cc; prefix from src/debug.cc).
def rank_file(host: str, pid: int, dev: int, rank: int, world: int, *, network: str, version: str = "2.21.5") -> str:
    p = f"{host}:{pid}:{pid + 7} [{dev}] NCCL INFO "
    peer = (rank + 1) % world
    lines = [
        f"{host}:{pid}:{pid} [{dev}] NCCL INFO NCCL version {version}+cuda12.4",
        p
        + (
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>"
            if network == "IB"
            else "NET/Socket : Using [0]eth0:10.0.0.1<0>"
        ),
        p + f"Using network {network}",
        p + f"comm 0x55d1c8a0 rank {rank} nRanks {world} nNodes {world // 2} localRanks 2 localRank {rank % 2} MNNVL 0",
        p
        + f"Channel 00/0 : {rank}[{dev}] -> {peer}[{peer % 2}] [send] via NET/{network}/0{'/GDRDMA' if network == 'IB' else ''}",
        p + f"Channel 00/0 : {rank}[{dev}] -> {rank ^ 1}[{dev ^ 1}] via P2P/CUMEM/read",
        p
        + f"ncclCommInitRank comm 0x55d1c8a0 rank {rank} nranks {world} cudaDev {dev} nvmlDev {dev} busId 1b000 commId 0x5bd8 - Init COMPLETE",
    ]
    return "\n".join(lines) + "\n"


def table(files: dict[tuple[str, int], str]) -> pa.Table:
    parts = [
        to_tables(parse_nccl_lines(text.splitlines()), host=host, rank=rank)[SignalKind.NCCL_PROCS]
        for (host, rank), text in files.items()
    ]
    return pa.concat_tables(parts)


def job(world: int = 8, socket_hosts=(), old_version_hosts=()) -> dict[tuple[str, int], str]:
    files = {}
    for r in range(world):
        host = f"node{r // 2 + 1:02d}"
        files[(host, r)] = rank_file(
            host,
            1000 + r,
            r % 2,
            r,
            world,
            network="Socket" if host in socket_hosts else "IB",
            version="2.18.1" if host in old_version_hosts else "2.21.5",
        )
    return files


def test_the_host_that_fell_back_to_sockets_is_named_with_its_ranks() -> None:
    (f,) = analyze_nccl(table(job(socket_hosts=("node03",))))
    assert (f.kind, f.category, f.hosts, f.ranks) == (FindingKind.NETWORK_ERROR, Category.SOCKET, ("node03",), (4, 5))
    assert "fell back to sockets" in f.summary and "6 of 8 processes use IB" in f.summary
    assert f.evidence["net_devices"] == ["Socket: [0]eth0:10.0.0.1<0>"]


def test_a_job_on_sockets_everywhere_and_a_clean_ib_job_name_nobody() -> None:
    assert analyze_nccl(table(job())) == []
    assert analyze_nccl(table(job(socket_hosts=("node01", "node02", "node03", "node04")))) == []


def test_half_on_sockets_is_a_configuration_not_a_culprit() -> None:
    assert analyze_nccl(table(job(socket_hosts=("node01", "node02")))) == []


def test_the_minority_nccl_version_is_named() -> None:
    (f,) = analyze_nccl(table(job(old_version_hosts=("node02",))))
    assert (f.category, f.hosts, f.ranks) == (Category.NCCL, ("node02",), (2, 3))
    assert f.evidence["nccl_version"] == ["2.18.1+cuda12.4"] and f.evidence["job_nccl_version"] == "2.21.5+cuda12.4"


def test_a_host_without_p2p_is_named() -> None:
    files = job()
    for r in (6, 7):
        files[("node04", r)] = files[("node04", r)].replace("via P2P/CUMEM/read", "via SHM/direct/direct")
    (f,) = analyze_nccl(table(files))
    assert (f.category, f.hosts) == (Category.NCCL, ("node04",)) and "no P2P" in f.summary


# ----------------------------------------------------------------------- env and run dir


def test_nccl_debug_env_defaults_to_warn_and_keeps_the_users_choice(tmp_path: Path) -> None:
    env = nccl_env.nccl_debug_env(tmp_path, "node02")
    assert env == {"NCCL_DEBUG": "WARN", nccl_env.NCCL_DEBUG_DIR_ENV: str(tmp_path / "logs" / "node02")}
    info = nccl_env.nccl_debug_env(tmp_path, "node02", level="info")
    assert info["NCCL_DEBUG"] == "INFO" and info["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    mine = nccl_env.nccl_debug_env(tmp_path, "node02", {"NCCL_DEBUG": "TRACE", "NCCL_DEBUG_FILE": "/x/%h.%p"})
    assert mine == {}
    # In the rank: its own file, named by rank (NCCL_DEBUG_FILE only knows %h and %p).
    environ = dict(env)
    assert nccl_env.point_debug_file(5, environ) == nccl_log_path(tmp_path, "node02", 5)
    assert environ["NCCL_DEBUG_FILE"] == str(tmp_path / "logs" / "node02" / "nccl-rank-5.log")
    assert nccl_env.point_debug_file(5, {"NCCL_DEBUG_FILE": "/mine"}) is None


def test_diagnose_reads_per_rank_nccl_logs_of_a_run_dir(tmp_path: Path, cli) -> None:
    run = tmp_path / "run"
    files = job(socket_hosts=("node03",))
    for (host, rank), text in files.items():
        p = nccl_log_path(run, host, rank)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    hosts = sorted({h for h, _ in files})
    write_run_info(
        run,
        RunInfo(
            run_id="r-nccl",
            world_size=8,
            nproc_per_node=2,
            hosts=tuple(HostRanks(h, tuple(r for hh, r in files if hh == h)) for h in hosts),
        ),
    )
    res = cli("diagnose", str(run), "--json")
    doc = json.loads(res.stdout)
    net = [f for f in doc["findings"] if f["kind"] == "network_error"]
    assert [(f["category"], f["hosts"], f["ranks"]) for f in net] == [("socket", ["node03"], [4, 5])], res.stderr


@pytest.mark.parametrize("suffix", [".log", ".log.gz"])
def test_diagnose_reads_nccl_lines_of_one_pasted_log_plain_or_gzipped(tmp_path: Path, cli, suffix: str) -> None:
    # Every rank's lines in one file, as srun or a user's paste gives them; hosts as NCCL logged them.
    text = "".join(job(socket_hosts=("node03",)).values())
    path = tmp_path / f"job{suffix}"
    path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    res = cli("diagnose", str(path), "--json", "--fail-on", "never")
    net = [f for f in json.loads(res.stdout)["findings"] if f["kind"] == "network_error"]
    assert [(f["category"], f["hosts"]) for f in net] == [("socket", ["node03"])], res.stdout
