"""`trainctl fleet-sim` then `trainctl diagnose --json` on its output, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from trainctl.dataset import hosts_present, read_table


def test_fleet_sim_then_diagnose(cli, tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    r = cli(
        "fleet-sim",
        "--hosts",
        "6",
        "--gpus",
        "2",
        "--minutes",
        "5",
        "--fault",
        "power_brake@node04:90",
        "--fault",
        "xid95@2:120",
        "--quirk",
        "fleet_pause:200",
        "--quirk",
        "warm_host@node05",
        "--out",
        out,
        "--seed",
        "5",
    )
    assert r.code == 0, r.stderr
    assert "faulty: node02, node04" in r.stdout
    labels = json.loads((out / "fleet_labels.json").read_text())
    assert [(f["kind"], f["host"], f["onset_s"]) for f in labels["faults"]] == [
        ("power_brake", "node04", 90.0),
        ("xid95", "node02", 120.0),
    ]
    assert hosts_present(out) == [f"node0{i}" for i in range(1, 7)]
    assert read_table(out, "gpu_metrics").num_rows == 6 * 2 * 300

    d = cli("diagnose", out, "--json")
    assert d.code == 3, d.stderr  # a critical finding (the uncontained ECC error)
    found = {(f["hosts"][0], f["category"], f["severity"]) for f in json.loads(d.stdout)["findings"]}
    assert found == {("node02", "ecc", "critical"), ("node04", "power", "warning")}


def test_fleet_sim_rejects_bad_spec(cli, tmp_path: Path) -> None:
    r = cli("fleet-sim", "--hosts", "4", "--fault", "thermal@node09", "--out", tmp_path / "x")
    assert r.code == 1 and "node09" in r.stderr and "node01..node04" in r.stderr


def test_fleet_sim_refuses_a_directory_that_holds_data(cli, tmp_path: Path) -> None:
    # 8 hosts, then 4 into the same folder: hosts 5-8 would stay and diagnose would blame them as silent
    out = tmp_path / "fleet"
    assert cli("fleet-sim", "--hosts", "8", "--gpus", "1", "--minutes", "1", "--out", out).code == 0
    r = cli("fleet-sim", "--hosts", "4", "--gpus", "1", "--minutes", "1", "--out", out)
    assert r.code == 2 and "Traceback" not in r.stderr, r
    assert r.stderr.strip() == (
        f"error: --out {out}: directory is not empty (an older dataset's hosts would mix with this one's); "
        "pick a new or empty directory"
    )
    assert hosts_present(out) == [f"node0{i}" for i in range(1, 9)]  # the first simulation, untouched
    (tmp_path / "empty").mkdir()  # an empty folder (mktemp -d) is fine
    assert cli("fleet-sim", "--hosts", "2", "--gpus", "1", "--minutes", "1", "--out", tmp_path / "empty").code == 0
