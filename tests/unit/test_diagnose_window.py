"""`diagnose --since/--until` (issue 17 item 6): the window keeps only its rows, in every timed table."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from trainctl.errors import InputError
from trainctl.ops.diagnose.window import parse_time


def test_times_keep_their_offsets_and_relative_durations() -> None:
    assert parse_time("2026-11-25T03:00:00+01:00", flag="--since") == datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
    assert parse_time("2026-11-25T03:00:00", flag="--since").tzinfo is UTC  # no offset: UTC, as documented
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert parse_time("90m", flag="--since", now=now) == datetime(2026, 11, 25, 10, 30, tzinfo=UTC)
    with pytest.raises(InputError, match="--until 'yesterday': not a time"):
        parse_time("yesterday", flag="--until")


def test_a_window_before_the_crash_sees_no_crash(cli, tmp_path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(
        "2026-11-25T01:00:00,000000+00:00 NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
        "2026-11-25T03:00:00,000000+00:00 NVRM: Xid (PCI:0000:3b:00): 48, pid=2, name=python, An uncorrectable double "
        "bit error (DBE) has been detected on GPU.\n"
    )

    def xids(*flags):
        r = cli("diagnose", log, "--json", "--fail-on", "never", *flags)
        assert r.code == 0, r.stderr
        return sorted(x for f in json.loads(r.stdout)["findings"] for x in f["evidence"].get("xids", []))

    assert xids() == [48, 79]
    assert xids("--since", "2026-11-25T02:00:00+00:00") == [48]
    assert xids("--until", "2026-11-25T03:00:00+01:00") == [79]  # 02:00 UTC
    r = cli("diagnose", log, "--since", "soon")
    assert r.code == 1 and "--since 'soon': not a time" in r.stderr and "Traceback" not in r.stderr
