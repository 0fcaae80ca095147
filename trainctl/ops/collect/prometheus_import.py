"""`trainctl import-metrics`: dcgm-exporter / node-exporter scrapes into gpu_metrics / host_metrics.

Each SOURCE is an http(s) URL (scraped `samples` times, `every_s` apart) or a saved scrape file
(one sample, timed by the file's mtime). What a source holds is read from its text (DCGM_FI_* or
node_*), never from its name. Parsing and mapping live in trainctl.collectors.prometheus_metrics.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from trainctl import dataset
from trainctl.collectors import prometheus_metrics as pm
from trainctl.errors import InputError
from trainctl.schemas import SignalKind, schema_for

__all__ = ["ImportResult", "import_metrics", "MAX_SCRAPE_BYTES"]

logger = logging.getLogger(__name__)

MAX_SCRAPE_BYTES = 64 << 20  # a dcgm-exporter scrape of 8 GPUs is ~50 KB


@dataclass
class ImportResult:
    out: Path
    gpu_rows: dict[str, int] = field(default_factory=dict)  # host -> rows written
    host_rows: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"out": str(self.out), "gpu_rows": self.gpu_rows, "host_rows": self.host_rows, "skipped": self.skipped}


def _read(source: str, timeout_s: float) -> tuple[str, int]:
    """(text, ts_ns) of one scrape; a one-line InputError naming the source otherwise."""
    if source.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(source, timeout=timeout_s) as r:  # noqa: S310 (http(s) only, checked above)
                data = r.read(MAX_SCRAPE_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InputError(f"{source}: cannot scrape ({exc}); check the exporter's address and port") from exc
        ts = time.time_ns()
    else:
        p = Path(source)
        if not p.is_file():
            raise InputError(f"{source}: no such scrape file; pass a saved /metrics output or an http(s) URL")
        with open(p, "rb") as f:
            data = f.read(MAX_SCRAPE_BYTES + 1)
        ts = p.stat().st_mtime_ns
    if len(data) > MAX_SCRAPE_BYTES:
        raise InputError(f"{source}: over {MAX_SCRAPE_BYTES >> 20} MiB; not one exporter scrape")
    return data.decode("utf-8", errors="replace"), ts


def import_metrics(
    sources: Sequence[str],
    out: Path,
    *,
    host: str | None = None,
    samples: int = 1,
    every_s: float = 1.0,
    timeout_s: float = 10.0,
) -> ImportResult:
    """Scrape or read every source, map to gpu_metrics / host_metrics, write one part per host."""
    if samples < 1:
        raise InputError(f"--samples {samples}: must be >= 1")
    result = ImportResult(out)
    gpu: dict[str, list[dict]] = {}
    node: dict[str, list[pm.NodeScrape]] = {}
    for source in sources:
        n = samples if source.startswith(("http://", "https://")) else 1
        for i in range(n):
            if i:
                time.sleep(every_s)
            text, ts = _read(source, timeout_s)
            try:
                if pm.is_dcgm(text):
                    for h, rows in pm.parse_dcgm(text, ts_ns=ts, host=host).items():
                        gpu.setdefault(h, []).extend(rows)
                elif pm.is_node(text):
                    if not host:
                        raise InputError(f"{source}: node-exporter output names no host; pass --host")
                    node.setdefault(host, []).append(pm.parse_node(text, ts_ns=ts))
                else:
                    result.skipped.append(f"{source}: neither dcgm-exporter (DCGM_FI_*) nor node-exporter (node_*)")
            except ValueError as exc:  # prometheus_client's parser on text that is not the format
                result.skipped.append(f"{source}: not Prometheus text format ({exc})")
    for h, rows in gpu.items():
        if not any(len(r) > 5 for r in rows):
            continue
        _write(out, SignalKind.GPU_METRICS, h, rows)
        result.gpu_rows[h] = len(rows)
    for h, scrapes in node.items():
        rows = pm.host_rows(scrapes)
        _write(out, SignalKind.HOST_METRICS, h, rows)
        result.host_rows[h] = len(rows)
    if not result.gpu_rows and not result.host_rows:
        raise InputError("no metrics read: " + ("; ".join(result.skipped) or "the sources held no GPU or host samples"))
    return result


def _write(out: Path, kind: SignalKind, host: str, rows: list[dict]) -> None:
    schema = schema_for(kind)
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    cols["ts"] = pa.array(cols["ts"], pa.int64()).cast(pa.timestamp("ns", tz="UTC"))
    table = pa.table({f.name: pa.array(cols[f.name]).cast(f.type) if f.name != "ts" else cols["ts"] for f in schema})
    dataset.write_table(out, kind, host, table, part=f"prometheus-{time.time_ns()}")
