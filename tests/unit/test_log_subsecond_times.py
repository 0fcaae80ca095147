"""Times with more than six digits after the second, which strptime's %f rejects: Go's time.RFC3339Nano (the kubelet's
CRI container log files, kubernetes pkg/kubelet/kuberuntime/logs/logs.go; docker's json-file "time") and .NET's
round-trip "o" format (GitHub Actions and Azure Pipelines runner logs). A line that carries one has that time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from trainctl.collectors.log_records import clean_lines

LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


@pytest.mark.parametrize(
    "prefix",
    [
        "2026-11-27T01:02:03.123456789Z stderr F ",  # CRI log file (RFC3339Nano)
        "2026-11-27T01:02:03.1234567Z ",  # GitHub Actions runner
        "2026-11-27T01:02:03.123456Z ",  # microseconds, read before too
    ],
)
def test_a_line_has_its_carriers_time(prefix: str) -> None:
    (rec,) = list(clean_lines(prefix + LINE))
    assert rec.text == LINE
    assert rec.ts == datetime(2026, 11, 27, 1, 2, 3, 123456, tzinfo=UTC)
