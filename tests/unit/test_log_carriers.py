"""A log reads the same whatever launcher or log shipper carried it (issue 13 item 3).

Every dev excerpt the analyzer reads right must read the same under each carrier of
bench/log_carriers.py (launcher prefixes, shippers' JSON, CRLF, HTML escaping): the same kind of first
finding and, where the carrier names no host or rank of its own, the same culprit. Dev rows only
(bench/logs_accuracy.py dev_rows): the held-out rows stay unread.
"""

from __future__ import annotations

from functools import cache

import pytest
from bench_modules import load_bench  # tests/ is on sys.path

CARRIERS = load_bench("log_carriers").CARRIERS


@cache
def _read_right() -> tuple[tuple[dict, object], ...]:
    """The dev rows whose first finding has the label's kind, with that finding."""
    b = load_bench("logs_accuracy")
    out = []
    for row in b.dev_rows():
        findings = b.diagnose_order(row)
        if findings and findings[0].kind in b.LABEL_KINDS[row["category"]]:
            out.append((row, findings[0]))
    return tuple(out)


@pytest.mark.parametrize("name", sorted(CARRIERS))
def test_the_carrier_changes_no_verdict(name: str) -> None:
    carry, names_its_own = CARRIERS[name]
    b = load_bench("logs_accuracy")
    right = _read_right()
    assert len(right) >= 330  # the dev rows read right today (338 of 346 on 2026-11-27)
    changed = []
    for row, first in right:
        findings = b.diagnose_order(dict(row, log=carry(row["log"])))
        if not findings or findings[0].kind is not first.kind:
            changed.append((row["id"], first.kind.value, findings[0].kind.value if findings else "silent"))
        # A syslogd wall message is a terminal broadcast that no launcher carries.
        elif not names_its_own and "Message from syslogd@" not in row["log"]:
            if (findings[0].ranks, findings[0].hosts) != (first.ranks, first.hosts):
                changed.append((row["id"], (first.ranks, first.hosts), (findings[0].ranks, findings[0].hosts)))
    assert changed == []


def test_a_shipper_envelope_names_the_host_it_ran_on() -> None:
    from trainctl.collectors.logs import parse_log_text

    carry, _ = CARRIERS["journal_json"]
    table = parse_log_text(carry("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"))
    rows = [r for r in table.to_pylist() if r["kind"]]
    assert rows and rows[0]["kind"] == "oom" and rows[0]["rank"] == 3 and rows[0]["host"] == "gpu-node-7"


def test_a_healthy_runs_lines_blame_nobody_and_give_only_the_weakest_reading() -> None:
    """The preamble the carriers put in front of excerpts: torchrun's banner, c10d's IPv6 warnings,
    NCCL's init lines and a healthy H100 run (whose warnings say "hang" and "deprecated"). None of its lines is
    a failure; on its own it is a log that ends mid-run."""
    b = load_bench("logs_accuracy")
    preamble = load_bench("log_carriers").HEALTHY_PREAMBLE
    # on its own it is a run at work whose log ends mid-run: only the weakest reading, low confidence, no blame
    (f,) = b.diagnose_order({"id": "healthy", "log": preamble})
    assert f.evidence["signatures"] == ["log_ends_mid_run"] and f.confidence <= 0.3
    assert (f.ranks, f.hosts) == ((), ())
    assert b.diagnose_order({"id": "healthy", "log": preamble + "Training completed.\n"}) == []
