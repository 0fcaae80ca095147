"""dcgm-exporter and node-exporter output read into gpu_metrics / host_metrics (issue 17 item 5),
on verbatim public scrapes (tests/fixtures/prometheus/README.md), through the CLI as a user runs it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainctl import dataset
from trainctl.collectors import prometheus_metrics as pm

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus"


def test_dcgm_exporter_fields_units_and_blank_sentinels() -> None:
    rows = pm.parse_dcgm((FIX / "dcgm_exporter_1gpu.prom").read_text(), ts_ns=1, host="gpu7")
    (r,) = rows["gpu7"]
    assert r["gpu"] == 0 and r["gpu_uuid"] == "GPU-8c16e996-bd76-aa91-17e7-b48bcd0208ba"
    assert (r["sm_clock_mhz"], r["temp_c"], r["power_w"]) == (885, 41.0, 23.528)
    assert r["mem_used_bytes"] == 1057 * 2**20 and r["mem_total_bytes"] == (1057 + 7064) * 2**20
    assert r["xid"] is None and r["ecc_dbe_total"] == 0 and r["retired_pages"] == 0
    l40s = pm.parse_dcgm((FIX / "dcgm_exporter_l40s_hostname.prom").read_text(), ts_ns=1, host="fallback")
    assert [(r["gpu"], r["gpu_name"], r["pci_bus_id"]) for r in l40s["ubuntu-sv16"]] == [
        (0, "NVIDIA L40S", "00000000:0D:00.0"),
        (1, "NVIDIA L40S", "00000000:B4:00.0"),
    ]
    assert "fallback" not in l40s  # MEMORY_TEMP is not a gpu_metrics column
    assert pm._blank(9223372036854775794.0) and pm._blank(float(0x7FFFFFF0)) and not pm._blank(41.0)  # DCGM "no value"


def test_node_exporter_rates_between_scrapes() -> None:
    text = (FIX / "node_exporter.prom").read_text()
    a = pm.parse_node(text, ts_ns=10**9)
    later = text.replace('device="eth0"} 9.665855e+06', 'device="eth0"} 1.0665855e+07').replace(
        'mode="user"} 6.39', 'mode="user"} 7.39'
    )
    b = pm.parse_node(later, ts_ns=3 * 10**9)
    first, second = pm.host_rows([b, a])
    assert first["mem_used_bytes"] == 1028694016 - 745787392 and "net_rx_bytes_per_s" not in first
    assert second["net_rx_bytes_per_s"] == 1e6 / 2  # loopback left out; 1 MB over 2 s
    assert second["cpu_util_pct"] == 100.0  # only user time moved (no idle in this excerpt)


def test_cli_imports_into_a_dataset_that_diagnose_reads(cli, tmp_path) -> None:
    scrape = tmp_path / "gpu7.prom"
    scrape.write_text((FIX / "dcgm_exporter_1gpu.prom").read_text())
    node = tmp_path / "node.prom"
    node.write_text((FIX / "node_exporter.prom").read_text())
    t = scrape.stat().st_mtime_ns + 2 * 10**9
    os.utime(node, ns=(t, t))
    out = tmp_path / "ds"
    r = cli("import-metrics", scrape, node, "--out", out, "--host", "gpu7", "--json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["gpu_rows"] == {"gpu7": 1}
    g = dataset.read_table(out, "gpu_metrics").to_pylist()
    assert g[0]["host"] == "gpu7" and g[0]["sm_clock_mhz"] == 885
    assert dataset.read_table(out, "host_metrics").num_rows == 1
    d = cli("diagnose", out, "--json", "--fail-on", "never")
    assert d.code == 0 and "Traceback" not in d.stderr, d.stderr


def test_not_prometheus_text_is_one_line(cli, tmp_path) -> None:
    bad = tmp_path / "x.prom"
    bad.write_text("hello world\n")
    r = cli("import-metrics", bad, "--out", tmp_path / "ds")
    assert r.code == 1 and "no metrics read" in r.stderr and "Traceback" not in r.stderr
    r = cli("import-metrics", "http://127.0.0.1:9/metrics", "--out", tmp_path / "ds")
    assert r.code == 1 and "cannot scrape" in r.stderr
