"""Log parsing is linear and bounded (issue 15 item 2), and never silent on an error it does not know (issue 13 item 3)."""

from __future__ import annotations

import gzip

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import MAX_MESSAGE_CHARS, parse_log_file, parse_log_text
from trainctl.findings import Category, FindingKind


@pytest.mark.timeout(60)  # the markdown-link pattern was quadratic here: 100 KB took 44 s, 1 MB would take over an hour
def test_a_megabyte_of_brackets_is_linear() -> None:
    assert parse_log_text("[" * 1_000_000).num_rows == 0


@pytest.mark.timeout(60)
def test_a_huge_error_line_is_quoted_cut_with_its_size() -> None:
    line = "RuntimeError: CUDA error: an illegal memory access was encountered " + "x" * 5_000_000
    (row,) = [r for r in parse_log_text(line).to_pylist() if r["kind"]]
    assert len(row["message"]) == MAX_MESSAGE_CHARS and f'"message_chars": {len(line)}' in row["fields"]


def test_truncated_gzip_keeps_what_was_readable(tmp_path, caplog) -> None:
    data = gzip.compress(b"ok\n" * 1000 + b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    p = tmp_path / "rank-0.log.gz"
    p.write_bytes(data[: len(data) - 8])  # the trailer (CRC, size) cut off
    t = parse_log_file(p)
    assert any(r["kind"] == "crash" for r in t.to_pylist())
    assert "truncated gzip" in caplog.text


def test_an_unknown_error_is_an_unclassified_finding_quoting_it() -> None:
    text = "epoch 1 step 10\nFrobnicatorError: the widget refused to spin\nepoch 1 step 11\n"
    (f,) = analyze_log_events(parse_log_text(text, "x.log"))
    assert (f.kind, f.category) == (FindingKind.CRASH, Category.UNCLASSIFIED)
    assert "FrobnicatorError: the widget refused to spin" in f.summary
    assert f.ranks == () and f.hosts == ()  # it says something failed, not who


def test_known_errors_are_not_also_unclassified() -> None:
    text = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\nERROR: something else\n"
    kinds = {(f.kind, f.category) for f in analyze_log_events(parse_log_text(text, "x.log"))}
    assert (FindingKind.CRASH, Category.UNCLASSIFIED) not in kinds and any(k is FindingKind.OOM for k, _ in kinds)


def test_a_log_with_nothing_wrong_stays_quiet() -> None:
    assert analyze_log_events(parse_log_text("step 1 loss 2.3\nstep 2 loss 2.1\nall good\n", "x.log")) == []


@pytest.mark.parametrize(
    "line, kind, category",
    [
        ("step 20/60 loss nan step_ms 37.8", FindingKind.NUMERICAL, Category.NAN_LOSS),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
         "NVIDIA driver is installed and running.", FindingKind.FAULTY_HOST, Category.GPU_LOST),
        ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error", FindingKind.FAULTY_HOST,
         Category.GPU_LOST),
        ("pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0", FindingKind.FAULTY_HOST,
         Category.PCIE_DOWNGRADE),
        ("mce: [Hardware Error]: CPU 12: Machine Check: 0 Bank 7: cc00008000010090", FindingKind.FAULTY_HOST,
         Category.MCE),
        ("node1:1:2 [0] proxy.cc:1905 NCCL WARN [Proxy Service 0] Failed to execute operation Connect from rank 0, "
         "retcode 3", FindingKind.NETWORK_ERROR, Category.NCCL),
    ],
)  # fmt: skip
def test_signatures_from_primary_sources(line, kind, category) -> None:
    fs = analyze_log_events(parse_log_text(line, "x.log"))
    assert fs and (fs[0].kind, fs[0].category) == (kind, category), [f.summary for f in fs]


def test_a_gzip_bomb_is_cut_at_the_cap(tmp_path, caplog) -> None:
    from trainctl.collectors.logs import read_log_text

    p = tmp_path / "bomb.log.gz"
    p.write_bytes(gzip.compress(b"\0" * (64 << 20), compresslevel=1))  # 64 MiB of zeros, ~256 KB on disk
    assert p.stat().st_size < 1 << 20
    assert len(read_log_text(p, max_bytes=1 << 20)) == 1 << 20
    assert "over 1048576 bytes decompressed" in caplog.text


def test_a_c_librarys_failure_at_its_source_location_is_error_looking() -> None:
    line = ".../src/host/mem/mem_heap.cpp:1519: non-zero status: 1 cuMemMap failed"
    (f,) = analyze_log_events(parse_log_text(line + "\n", "x.log"))
    assert f.category is Category.UNCLASSIFIED and "cuMemMap failed" in f.summary
    # NCCL's own INFO lines that mention a failure to find an optional plugin are not error lines
    info = "node1:100:201 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.\n"
    assert all(f.category is not Category.UNCLASSIFIED for f in analyze_log_events(parse_log_text(info, "x.log")))
