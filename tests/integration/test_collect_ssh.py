"""`trainctl collect` against real sshd test hosts on loopback (tests/sshd.py).

Every host has its own sshd, host key, address and filesystem (the same run dir path names
different files on every host), so these runs go through the same paramiko, known_hosts and tar
paths a real cluster would.
"""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from trainctl import dataset
from trainctl.inventory import parse_hosts
from trainctl.ops.collect.collection import CollectOptions, collect, parse_kinds
from trainctl.rundir import HostRanks, RunInfo, write_run_info

pytestmark = [pytest.mark.slow, pytest.mark.sshd]

HOSTS = ["node01", "node02", "node03"]
COLLECT_OWN = {"collection_status", "host_facts", "kernel", ".trainctl-collect"}


def make_run(cluster, hosts=HOSTS, *, slow_rank: int = 3, steps: int = 20) -> Path:
    """A 2-ranks-per-host run dir on each host (what `trainctl launch` leaves), rank `slow_rank` slow."""
    info = RunInfo(
        "r-test",
        2 * len(hosts),
        2,
        tuple(HostRanks(h, (2 * i, 2 * i + 1)) for i, h in enumerate(hosts)),
        groups={"dp": (tuple(range(2 * len(hosts))),)},
        layout={"dp": 2 * len(hosts), "tp": 1, "pp": 1},
    )
    for i, h in enumerate(hosts):
        run = cluster.host_root(h) / "run"
        write_run_info(run, info)  # every host has run.json; the dataset takes it from the first
        for rank in (2 * i, 2 * i + 1):
            dur = [(150 if rank == slow_rank else 100) * 1_000_000 + 1000 * s for s in range(steps)]
            t = pa.table(
                {
                    "rank": [rank] * steps,
                    "local_rank": [rank % 2] * steps,
                    "step": list(range(steps)),
                    "phase": ["forward"] * steps,
                    "duration_ns": dur,
                    "source": ["perf_counter"] * steps,
                }
            )
            dataset.write_table(run, "timeline", h, t, part=f"rank{rank}-0")
            for sub, name, text in (
                ("logs/" + h, f"rank-{rank}.log", f"step 0 rank {rank}\n"),
                ("heartbeats", f"rank-{rank}.json", json.dumps({"rank": rank, "host": h, "step": steps})),
                ("ranks", f"rank-{rank}.json", json.dumps({"rank": rank, "host": h, "pid": 999999})),
            ):
                (run / sub).mkdir(parents=True, exist_ok=True)
                (run / sub / name).write_text(text)
    return cluster.remote_root / "run"


def collect_cli(cli, cluster, run: Path, out: Path, *extra: str, hosts: str = "node[01-03]"):
    return cli(
        "collect",
        str(run),
        "--hosts",
        hosts,
        "--out",
        str(out),
        "--ssh-config",
        str(cluster.ssh_config),
        "--json",
        *extra,
        timeout=120,
    )


def collect_inproc(cluster, run: Path, out: Path, spec: str = "node[01-03]", kinds: str | None = None):
    """The same ops entry point the CLI calls, in-process (saves a CLI start on this 2-core box)."""
    return collect(
        CollectOptions(
            run_dir=str(run),
            out=out,
            hosts=tuple(h.name for h in parse_hosts(spec)),
            kinds=parse_kinds([kinds] if kinds else None),
            ssh_config=str(cluster.ssh_config),
        )
    )


def _files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in COLLECT_OWN
    }


@pytest.mark.timeout(120)
def test_three_hosts_give_the_run_dirs_tables_and_rerun_fetches_nothing(sshd_cluster, cli, tmp_path: Path) -> None:
    cluster = sshd_cluster(3)
    run = make_run(cluster)
    out = tmp_path / "ds"
    res = collect_cli(cli, cluster, run, out)
    assert res.code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["failed_hosts"] == [] and summary["files_fetched"] == 3 * 8 + 1  # run.json once

    # The same files as the union of the hosts' run dirs (what a --local run dir holds), byte for byte.
    merged = tmp_path / "merged"
    for h in HOSTS:
        shutil.copytree(cluster.host_root(h) / "run", merged, dirs_exist_ok=True)
    assert _files(out) == _files(merged)
    assert all(filecmp.cmp(out / f, merged / f, shallow=False) for f in _files(merged))
    got = dataset.read_table(out, "timeline").sort_by([("rank", "ascending"), ("step", "ascending")])
    want = dataset.read_table(merged, "timeline").sort_by([("rank", "ascending"), ("step", "ascending")])
    assert got.equals(want) and got.num_rows == 6 * 20

    status = dataset.read_table(out, "collection_status").to_pylist()
    tl = {r["host"]: (r["ok"], r["rows"]) for r in status if r["kind"] == "timeline"}
    assert tl == {h: (True, 40) for h in HOSTS}
    assert dataset.read_table(out, "host_facts").column("gpu_count").to_pylist() == [0, 0, 0]

    # diagnose DATASET finds what diagnose RUN_DIR finds (collect's own coverage findings aside).
    def findings(path):
        r = cli("diagnose", str(path), "--json", "--fail-on", "never")
        assert r.code == 0, r.stderr
        return [f for f in json.loads(r.stdout)["findings"] if f["kind"] != "missing_data"]

    assert findings(out) == findings(merged)

    # Re-run: nothing changed, nothing fetched; then one changed log is the only transfer.
    again = collect_inproc(cluster, run, out)
    assert (again.files_fetched, again.bytes_fetched, again.failed_hosts) == (0, 0, [])
    (cluster.host_root("node02") / "run" / "logs" / "node02" / "rank-3.log").write_text(
        "step 0 rank 3\nstep 1 rank 3\n"
    )
    third = collect_inproc(cluster, run, out)
    assert third.files_fetched == 1 and [r.files_fetched for r in third.reports] == [0, 1, 0]
    assert (out / "logs" / "node02" / "rank-3.log").read_text().endswith("step 1 rank 3\n")


@pytest.mark.timeout(150)
def test_bad_hosts_are_recorded_and_do_not_spoil_the_others(sshd_cluster, cli, tmp_path: Path) -> None:
    modes = {
        "node01": "ok",
        "node02": "ok",
        "node03": "unreachable",
        "node04": "refuse_key",
        "node05": "changed_key",
        "node06": "silent",
        "node07": "ok",
        "node08": "unknown_key",
    }
    cluster = sshd_cluster(modes)
    run = make_run(cluster, ["node01", "node02"])  # node07 is up but has no run dir
    out = tmp_path / "ds"
    res = collect_cli(cli, cluster, run, out, "--connect-timeout-s", "2", hosts="node[01-08]")
    assert res.code == 0, res.stderr  # default: fail only when every host fails
    status = dataset.read_table(out, "collection_status").to_pylist()
    by_host: dict[str, set] = {}
    for r in status:
        by_host.setdefault(r["host"], set()).add((r["kind"], r["ok"], r["error_type"]))
    for h in ("node03", "node04", "node05", "node06", "node08"):
        assert all(not ok for _, ok, _ in by_host[h])
    assert {e for _, _, e in by_host["node03"]} == {"unreachable"}
    assert {e for _, _, e in by_host["node04"]} == {"auth_refused"}
    assert {e for _, _, e in by_host["node05"]} == {"host_key"}
    assert {e for _, _, e in by_host["node06"]} == {"timeout"}
    assert {e for _, _, e in by_host["node08"]} == {"host_key"}
    assert ("timeline", False, "no_run_dir") in by_host["node07"] and ("kernel_log", True, None) in by_host["node07"]
    errors = {r["host"]: r["error"] for r in status if r["kind"] == "timeline"}
    assert "CHANGED" in errors["node05"] and "ssh-keygen -R" in errors["node05"]
    assert (
        "unknown" in errors["node08"]
        and "ssh-keyscan -p" in errors["node08"]
        and "--accept-new-host-keys" in errors["node08"]
    )
    # The good hosts' data is complete.
    assert dataset.read_table(out, "timeline").num_rows == 4 * 20
    assert sorted(p.name for p in (out / "logs").rglob("*.log")) == [f"rank-{r}.log" for r in range(4)]
    summary = json.loads(res.stdout)
    assert sorted(summary["failed_hosts"]) == ["node03", "node04", "node05", "node06", "node07", "node08"]

    diag = json.loads(cli("diagnose", str(out), "--json", "--fail-on", "never").stdout)
    unreachable = sorted(f["hosts"][0] for f in diag["findings"] if f["kind"] == "faulty_host")
    assert unreachable == ["node03", "node06"]
    assert {h for f in diag["findings"] if f["kind"] == "missing_data" for h in f["hosts"]} >= {
        "node03",
        "node04",
        "node05",
        "node06",
        "node07",
        "node08",
    }

    # Past --max-failed-hosts: exit 1 with one line naming the count and the first error.
    strict = collect_cli(
        cli,
        cluster,
        run,
        tmp_path / "ds2",
        "--connect-timeout-s",
        "2",
        "--max-failed-hosts",
        "2",
        "--kinds",
        "timeline",
        hosts="node01,node03,node04,node05",
    )
    assert strict.code == 1
    assert "3 of 4 hosts failed (node03, node04, node05), more than --max-failed-hosts 2" in strict.stderr


@pytest.mark.timeout(90)
def test_accept_new_host_keys_saves_the_key_and_changed_keys_stay_refused(sshd_cluster, cli, tmp_path: Path) -> None:
    cluster = sshd_cluster({"node01": "unknown_key", "node02": "changed_key"})
    run = make_run(cluster, ["node01", "node02"])
    res = collect_cli(
        cli, cluster, run, tmp_path / "ds", "--accept-new-host-keys", "--kinds", "timeline", hosts="node01,node02"
    )
    summary = json.loads(res.stdout)
    assert summary["failed_hosts"] == ["node02"]
    h = cluster.hosts["node01"]
    assert f"[{h.address}]:{h.port} {h.host_pub}" in cluster.known_hosts.read_text()
    res2 = collect_cli(cli, cluster, run, tmp_path / "ds3", "--kinds", "timeline", hosts="node01")
    assert res2.code == 0 and json.loads(res2.stdout)["failed_hosts"] == []


@pytest.mark.timeout(90)
def test_inventory_forms(sshd_cluster, cli, tmp_path: Path) -> None:
    cluster = sshd_cluster(3)
    run = make_run(cluster)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node01 slots=2\nnode[02-03] slots=2  # rack 2\n")
    for i, spec in enumerate(["node01,node02,node03", "node[01-03]", str(hostfile)]):
        r = collect_inproc(cluster, run, tmp_path / f"ds{i}", spec, kinds="timeline,run_info")
        assert ([x.host for x in r.reports], r.failed_hosts, r.files_fetched) == (HOSTS, [], 7), spec
    res = collect_cli(cli, cluster, run, tmp_path / "ds-cli", "--kinds", "timeline,run_info", hosts=f"@{hostfile}")
    assert res.code == 0, res.stderr
    s = json.loads(res.stdout)
    assert (s["hosts"], s["failed_hosts"], s["files_fetched"]) == (3, [], 7)


@pytest.mark.timeout(90)
def test_live_stacks_of_running_ranks_via_py_spy(sshd_cluster, tmp_path: Path) -> None:
    pyspy_bin = Path(sys.executable).parent
    if not (pyspy_bin / "py-spy").exists():
        pytest.skip("py-spy not installed in this venv (pip install py-spy)")
    # The sshd sessions find py-spy on PATH, as on a training host where it is installed.
    cluster = sshd_cluster(2, env={"PATH": f"{pyspy_bin}:/usr/local/bin:/usr/bin:/bin"})
    run = cluster.remote_root / "run"
    rank = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\ndef train_step_stuck():\n    while True: time.sleep(0.05)\ntrain_step_stuck()\n",
        ]
    )
    try:
        for h, procs in (("node01", [(0, rank.pid), (1, 2**22 + 7)]), ("node02", [(2, rank.pid)])):
            ranks = cluster.host_root(h) / "run" / "ranks"
            ranks.mkdir(parents=True)
            for r, pid in procs:
                (ranks / f"rank-{r}.json").write_text(json.dumps({"rank": r, "host": h, "pid": pid}))
        # node02's rank file claims node01: a pid is only meaningful on its own host, so it is skipped.
        (cluster.host_root("node02") / "run" / "ranks" / "rank-2.json").write_text(
            json.dumps({"rank": 2, "host": "node01", "pid": rank.pid})
        )
        out = tmp_path / "ds"
        res = collect_inproc(cluster, run, out, "node01,node02", kinds="pyspy")
    finally:
        rank.kill()
        rank.wait()
    assert res.failed_hosts == []
    assert sorted(str(p.relative_to(out)) for p in (out / "stacks").rglob("*.txt")) == [
        "stacks/node01/rank-0.pyspy.txt"
    ]
    text = (out / "stacks" / "node01" / "rank-0.pyspy.txt").read_text()
    assert f"Process {rank.pid}" in text and "train_step_stuck" in text
    rows = {
        (r["host"], r["kind"]): (r["ok"], r["rows"]) for r in dataset.read_table(out, "collection_status").to_pylist()
    }
    assert rows == {("node01", "pyspy"): (True, 1), ("node02", "pyspy"): (True, 0)}


@pytest.mark.timeout(150)
def test_a_host_cannot_frame_another(sshd_cluster, cli, tmp_path: Path) -> None:
    """node03's run dir carries files under node01's paths: a slow timeline part and a rank log with
    an Xid. They are refused (only node01 sends node01's files), recorded in collection_status, and
    diagnose blames nobody for them."""
    cluster = sshd_cluster(3)
    run = make_run(cluster, slow_rank=99)  # no real straggler
    evil = cluster.host_root("node03") / "run"
    t = pa.table(
        {
            "rank": [0] * 20,
            "local_rank": [0] * 20,
            "step": list(range(20)),
            "phase": ["forward"] * 20,
            "duration_ns": [900_000_000] * 20,
            "source": ["perf_counter"] * 20,
        }
    )
    dataset.write_table(evil, "timeline", "node01", t, part="rank0-evil")
    (evil / "logs" / "node01").mkdir(parents=True)
    (evil / "logs" / "node01" / "rank-0.log").write_text(
        "NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
    )
    out = tmp_path / "ds"
    res = collect_cli(cli, cluster, run, out)
    assert res.code == 0, res.stderr
    assert not list((out / "timeline" / "host=node01").glob("*evil*"))
    assert (out / "logs" / "node01" / "rank-0.log").read_text() == "step 0 rank 0\n"  # node01's own
    status = dataset.read_table(out, "collection_status").to_pylist()
    refused = [r for r in status if r["error_type"] == "foreign_paths"]
    assert [r["host"] for r in refused] == ["node03"] and "2 file(s) under other hosts' paths (node01)" in refused[0][
        "error"
    ]
    d = cli("diagnose", str(out), "--json", "--fail-on", "never")
    findings = json.loads(d.stdout)["findings"]
    assert not [f for f in findings if "node01" in f["hosts"] and f["kind"] != "missing_data"], findings
    assert any(f["kind"] == "missing_data" and f["severity"] == "info" for f in findings)


@pytest.mark.timeout(150)
def test_host_caps_are_applied_and_recorded(sshd_cluster, cli, tmp_path: Path) -> None:
    cluster = sshd_cluster(2)
    run = make_run(cluster, ["node01", "node02"])
    out = tmp_path / "ds"
    res = collect_cli(cli, cluster, run, out, "--max-host-files", "3", hosts="node[01-02]")
    assert res.code == 0, res.stderr
    status = dataset.read_table(out, "collection_status").to_pylist()
    capped = {r["host"]: r["error"] for r in status if r["error_type"] == "over_cap"}
    assert set(capped) == {"node01", "node02"} and all("past the host's caps (3 files" in e for e in capped.values())
    fetched = [p for p in out.rglob("*") if p.is_file() and p.relative_to(out).parts[0] not in COLLECT_OWN]
    assert len(fetched) <= 2 * 3


@pytest.mark.timeout(150)
def test_a_host_sending_a_sparse_member_is_refused_and_marked(sshd_cluster, cli, tmp_path: Path) -> None:
    """node02's `tar` is hostile (it packs sparse files as sparse members, GNU tar's --sparse): a 2 GiB
    rank log that is a few KB on the wire must not be unpacked. Its transfer is stopped and recorded
    in collection_status; node01 is collected as usual."""
    evil = tmp_path / "evil-bin"
    evil.mkdir()
    (evil / "tar").write_text('#!/bin/sh\nexec /usr/bin/tar --sparse "$@"\n')
    (evil / "tar").chmod(0o755)
    cluster = sshd_cluster(2, env={"PATH": f"{evil}:/usr/bin:/bin"})
    run = make_run(cluster, ["node01", "node02"])
    big = cluster.host_root("node02") / "run" / "logs" / "node02" / "rank-2.log"
    big.unlink()
    with open(big, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB apparent, no blocks on disk
    out = tmp_path / "ds"
    res = collect_cli(cli, cluster, run, out, hosts="node[01-02]")
    assert "Traceback" not in res.stderr, res.stderr
    status = dataset.read_table(out, "collection_status").to_pylist()
    refused = [r for r in status if r["error_type"] == "refused_member"]
    assert [r["host"] for r in refused] == ["node02"] and "sparse" in refused[0]["error"]
    got = out / "logs" / "node02" / "rank-2.log"
    assert not got.exists() or got.stat().st_size < 1 << 20
    assert (out / "logs" / "node01" / "rank-0.log").read_text() == "step 0 rank 0\n"
