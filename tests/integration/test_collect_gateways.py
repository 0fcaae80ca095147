"""Collect through gateway hosts (issue 18 item 2): the client talks only to the gateways, each
runs trainctl's own collect over its slice of the hosts and streams the dataset back; real sshd test
hosts for gateways and data hosts alike."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_collect_ssh import make_run  # noqa: E402 (tests/integration is on sys.path under pytest)

from trainctl import dataset

pytestmark = [pytest.mark.slow, pytest.mark.sshd]
DATA = ["node01", "node02", "node03", "node04"]


def _collect(cli, cluster, run: Path, out: Path, gateways: str, *extra: str):
    return cli("collect", run, "--hosts", "node[01-04]", "--gateways", gateways, "--out", out,
               "--ssh-config", cluster.ssh_config, "--gateway-ssh-config", cluster.ssh_config,
               "--json", *extra, timeout=240)  # fmt: skip


def _rows(root: Path, kind: str) -> list:
    return sorted(tuple(map(str, r.values())) for r in dataset.read_table(root, kind).to_pylist())


@pytest.mark.timeout(300)
def test_two_gateways_bring_back_what_a_direct_collect_does(sshd_cluster, cli, tmp_path: Path) -> None:
    cluster = sshd_cluster(["gw01", "gw02", *DATA])
    run = make_run(cluster, DATA, slow_rank=5)  # rank 5 lives on node03
    via, direct = tmp_path / "via", tmp_path / "direct"
    res = _collect(cli, cluster, run, via, "gw01,gw02")
    assert res.code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["hosts"] == 4 and summary["failed_hosts"] == [], [
        (r["host"], r["error_type"], r["error"]) for r in summary["status"] if r["kind"] == "gateway"
    ]
    d = cli("collect", run, "--hosts", "node[01-04]", "--out", direct, "--ssh-config", cluster.ssh_config, timeout=120)
    assert d.code == 0, d.stderr
    assert _rows(via, "timeline") == _rows(direct, "timeline")
    status = dataset.read_table(via, "collection_status").to_pylist()
    assert {r["host"] for r in status} == set(DATA) and all(r["ok"] for r in status if r["kind"] == "timeline")
    diag = json.loads(cli("diagnose", via, "--json", "--fail-on", "never").stdout)
    slow = [f for f in diag["findings"] if f["kind"] == "straggler"]
    assert [(f["ranks"], f["hosts"]) for f in slow] == [([5], ["node03"])]


@pytest.mark.timeout(300)
def test_a_dead_gateway_fails_its_hosts_and_a_gateway_cannot_frame_hosts_outside_its_slice(
    sshd_cluster, cli, tmp_path: Path
) -> None:
    cluster = sshd_cluster({"gw01": "ok", "gw02": "unreachable", **dict.fromkeys(DATA, "ok")})
    run = make_run(cluster, DATA, slow_rank=99)
    # gw01's "trainctl" collects for real, then plants an Xid line under node04's paths (not its slice)
    evil = tmp_path / "evil-python"
    evil.write_text(
        "#!/bin/sh\n"
        f'"{sys.executable}" "$@"; rc=$?\n'
        'out=""; prev=""; for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done\n'
        'mkdir -p "$out/logs/node04" && echo "NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus." '
        '> "$out/logs/node04/rank-7.log"\n'
        "exit $rc\n"
    )
    evil.chmod(0o755)
    out = tmp_path / "ds"
    res = _collect(cli, cluster, run, out, "gw01,gw02", "--gateway-python", str(evil), "--connect-timeout-s", "3")
    assert res.code == 0, res.stderr  # half the hosts failing is not fatal by default
    summary = json.loads(res.stdout)
    assert summary["failed_hosts"] == ["node03", "node04"]  # gw02's slice
    status = dataset.read_table(out, "collection_status").to_pylist()
    via_dead = [r for r in status if r["host"] in ("node03", "node04")]
    assert via_dead and all(r["kind"] == "gateway" and "via gateway gw02" in r["error"] for r in via_dead)
    refused = [r for r in status if r["error_type"] == "foreign_paths"]
    assert (
        len(refused) == 1 and "gateway gw01 sent 1 file(s) of hosts it does not collect (node04)" in refused[0]["error"]
    )
    assert not (out / "logs" / "node04").exists()
    diag = json.loads(cli("diagnose", out, "--json", "--fail-on", "never").stdout)
    assert not [f for f in diag["findings"] if f["kind"] == "faulty_host" and f["hosts"] == ["node04"]
                and f["category"] != "unreachable"]  # fmt: skip
