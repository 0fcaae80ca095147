"""InfiniBand/RoCE port counters in host_metrics as faulty-host evidence (issue 17 item 5, analyzer side).

The tables are host_metrics as the metrics agent writes them (tests/unit/test_ib_counters.py reads
a sysfs tree in the kernel ABI's layout into these columns); the values are the fault catalogue's
port events: a port leaving ACTIVE, link_downed counting a flap, error counters growing.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from trainctl.analyzers.faulty_hosts import find_faulty_hosts
from trainctl.findings import Category, Severity
from trainctl.schemas import SignalKind, schema_for


def _fleet(changes: dict[str, dict[str, list]] | None = None, minutes: int = 10) -> pa.Table:
    ts = pd.date_range("2026-11-26T10:00:00Z", periods=minutes * 6, freq="10s")
    rows = []
    for h in range(1, 7):
        host = f"node{h:02d}"
        for i, t in enumerate(ts):
            row = {"ts": t, "host": host, "cpu_util_pct": 40.0, "net_rx_bytes_per_s": 1e8, "net_tx_bytes_per_s": 1e8,
                   "gpu_count": 8, "ib_ports": 2, "ib_ports_active": 2, "ib_link_downed": 3, "ib_errors": 1000 + i // 20}  # fmt: skip
            for col, values in (changes or {}).get(host, {}).items():
                row[col] = values[i]
            rows.append(row)
    t = pa.Table.from_pylist(rows)
    want = schema_for(SignalKind.HOST_METRICS)
    return pa.table({f.name: t.column(f.name).cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
                     for f in want} | {"host": t.column("host")})  # fmt: skip


def _ib(findings):
    return {f.hosts[0]: f for f in findings if f.category is Category.IB}


def test_a_healthy_fleet_with_a_slow_error_trickle_and_an_uncabled_port_is_clean() -> None:
    n = 60
    unused = {"node06": {"ib_ports_active": [1] * n}}  # one port never cabled: never active in the data
    assert _ib(find_faulty_hosts(host_metrics=_fleet(unused))) == {}


def test_a_port_that_went_down_is_critical_and_a_flap_or_error_burst_a_warning() -> None:
    n = 60
    changes = {
        "node03": {"ib_ports_active": [2] * 30 + [1] * 30},
        "node04": {"ib_link_downed": [3] * 40 + [4] * 20},
        "node05": {"ib_errors": [1000 + 4 * i for i in range(n)]},  # 24/min
    }
    got = _ib(find_faulty_hosts(host_metrics=_fleet(changes)))
    assert set(got) == {"node03", "node04", "node05"}
    assert got["node03"].severity is Severity.CRITICAL and "2 -> 1 of 2 ports active" in got["node03"].summary
    assert got["node03"].evidence["detected_ts"].startswith("2026-11-26T10:05:00")
    assert got["node04"].severity is Severity.WARNING and "link_downed 3 -> 4" in got["node04"].summary
    assert got["node05"].severity is Severity.WARNING and got["node05"].confidence < 0.9
    assert "24/min" in got["node05"].summary


def test_hosts_without_an_hca_are_skipped() -> None:
    t = _fleet()
    nulls = {
        c: pa.nulls(t.num_rows, t.schema.field(c).type)
        for c in ("ib_ports", "ib_ports_active", "ib_link_downed", "ib_errors")
    }
    for c, v in nulls.items():
        t = t.set_column(t.schema.get_field_index(c), c, v)
    assert _ib(find_faulty_hosts(host_metrics=t)) == {}
