from __future__ import annotations

import pytest

from trainctl.errors import InventoryError
from trainctl.inventory import HostSpec, expand_nodelist, parse_hosts


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("node[01-03,7]", ["node01", "node02", "node03", "node7"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("r[1-2]-g[1,3]", ["r1-g1", "r1-g3", "r2-g1", "r2-g3"]),
        ("plain", ["plain"]),
    ],
)
def test_expand_nodelist(expr, expected) -> None:
    assert expand_nodelist(expr) == expected


def test_comma_list_with_slurm_ranges_keeps_order() -> None:
    assert [h.name for h in parse_hosts("b1,node[01-02],a1")] == ["b1", "node01", "node02", "a1"]


def test_hostfile_and_at_file(tmp_path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# cluster\nnode01 slots=8\nnode02 slots=4  # spare\n\nnode[03-04]\n")
    expected = [HostSpec("node01", 8), HostSpec("node02", 4), HostSpec("node03"), HostSpec("node04")]
    assert parse_hosts(f"@{f}") == expected
    assert parse_hosts(str(f)) == expected


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("", "empty host list"),
        ("node[01-", "unbalanced"),
        ("node[5-2]", "runs backwards"),
        ("a,a", "listed twice"),
        ("a;rm -rf", "is not a host name"),
        ("x/missing-hostfile", "cannot read hostfile"),
    ],
)
def test_bad_inventories_say_why(spec, msg) -> None:
    with pytest.raises(InventoryError, match=msg):
        parse_hosts(spec)


def test_bad_hostfile_line_names_file_and_line(tmp_path) -> None:
    f = tmp_path / "hosts"
    f.write_text("node01 slots=8\nnode02 cores=4\n")
    with pytest.raises(InventoryError, match=rf"{f}:2: cannot parse 'cores=4'"):
        parse_hosts(f"@{f}")


def test_hosts_from_the_slurm_allocation() -> None:
    from trainctl.errors import InventoryError
    from trainctl.inventory import parse_hosts

    env = {"SLURM_JOB_NODELIST": "gpu-a[001-003],gpu-b07"}
    assert [h.name for h in parse_hosts("slurm", env=env)] == ["gpu-a001", "gpu-a002", "gpu-a003", "gpu-b07"]
    assert [h.name for h in parse_hosts("slurm", env={"SLURM_NODELIST": "n[1-2]"})] == ["n1", "n2"]
    import pytest

    with pytest.raises(InventoryError, match="SLURM_JOB_NODELIST is not set"):
        parse_hosts("slurm", env={})


def test_cli_takes_hosts_from_slurm(cli, tmp_path) -> None:
    import os

    env = {**os.environ, "SLURM_JOB_NODELIST": "node[01-02]"}
    r = cli("launch", "--hosts", "slurm", "--nproc-per-node", "1", "--ssh-config", tmp_path / "none", env=env)
    assert r.code == 1 and "--ssh-config" in r.stderr and "Traceback" not in r.stderr  # got past the hosts
