"""IB/RoCE port counters in host_metrics (runtime/metrics_agent.py). This machine has no HCA, so the
sysfs tree is written here in the layout of Linux's Documentation/ABI/stable/sysfs-class-infiniband
(a fake at the true boundary): two devices, one port each; data counters in units of 4 octets."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from trainctl.dataset import conform
from trainctl.runtime.metrics_agent import HostSampler, read_ib_counters
from trainctl.schemas import SignalKind


def _proc(root: Path) -> Path:
    """A minimal /proc for HostSampler (its own parsers are tested in test_faulty_agent.py)."""
    (root / "proc" / "net").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    (root / "proc" / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 500 kB\n")
    (root / "proc" / "net" / "dev").write_text("h1\nh2\n")
    (root / "proc" / "loadavg").write_text("0.5 0.4 0.3 1/100 200\n")
    return root / "proc"


def _port(root: Path, dev: str, port: int, *, state: str, rcv: int, xmit: int, downed: int = 0, sym: int = 0) -> None:
    p = root / dev / "ports" / str(port)
    (p / "counters").mkdir(parents=True, exist_ok=True)
    (p / "state").write_text(state + "\n")
    for name, v in (("port_rcv_data", rcv), ("port_xmit_data", xmit), ("link_downed", downed),
                    ("symbol_error", sym), ("port_rcv_errors", 1)):  # fmt: skip
        (p / "counters" / name).write_text(f"{v}\n")


def test_counters_are_summed_over_ports_in_octets(tmp_path: Path) -> None:
    ib = tmp_path / "infiniband"
    _port(ib, "mlx5_0", 1, state="4: ACTIVE", rcv=1000, xmit=500, downed=1, sym=2)
    _port(ib, "mlx5_1", 1, state="1: DOWN", rcv=10, xmit=20)
    c = read_ib_counters(ib)
    assert c is not None
    assert (c.ports, c.ports_active) == (2, 1)
    assert (c.rx_bytes, c.tx_bytes) == (4 * 1010, 4 * 520)
    assert (c.link_downed, c.errors) == (1, 2 + 1 + 1)
    assert read_ib_counters(tmp_path / "none") is None


def test_sampler_rates_and_host_metrics_contract(tmp_path: Path) -> None:
    ib = tmp_path / "infiniband"
    _port(ib, "mlx5_0", 1, state="4: ACTIVE", rcv=0, xmit=0)
    s = HostSampler(_proc(tmp_path), ib_root=ib)
    first = s.sample(0, 8)
    assert first["ib_ports"] == 1 and first["ib_rx_bytes_per_s"] is None
    _port(ib, "mlx5_0", 1, state="1: DOWN", rcv=250_000_000, xmit=125_000_000, downed=1)
    second = s.sample(2 * 10**9, 8)
    assert second["ib_rx_bytes_per_s"] == pytest.approx(4 * 250_000_000 / 2)
    assert second["ib_tx_bytes_per_s"] == pytest.approx(4 * 125_000_000 / 2)
    assert (second["ib_ports_active"], second["ib_link_downed"]) == (0, 1)
    t = conform(pa.Table.from_pylist([first, second]), SignalKind.HOST_METRICS)
    assert t.column("ib_ports_active").to_pylist() == [1, 0]
    # a host without an HCA: the columns are there, null
    bare = HostSampler(_proc(tmp_path / "bare"), ib_root=tmp_path / "no-ib").sample(0, 8)
    assert "ib_ports" not in bare
    assert conform(pa.Table.from_pylist([bare]), SignalKind.HOST_METRICS).column("ib_ports").null_count == 1
