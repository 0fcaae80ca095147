"""One exec per host: the listing, a handoff line, then (only on `go`) the fetch, in one shell.

Run for real with `sh -c` through LocalSession (the session `collect --srun` uses; SSH and kubectl
sessions take the same stream/send/close_stdin calls).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from trainctl.collectors import rundir_sync
from trainctl.collectors.local_exec import LocalClient
from trainctl.collectors.remote_script import GO, build_script, split_sections
from trainctl.ops.collect.collection import _end, _read_probe
from trainctl.ops.collect.tar_stream import TarStream

NONCE = "0123456789abcdef"


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "logs" / "node01").mkdir(parents=True)
    (run / "logs" / "node01" / "rank-0.log").write_text("step 1\n")
    (run / "run.json").write_text("{}")
    return run


def _start(script: str):
    return LocalClient().connect("node01").stream(script, timeout_s=30, keep_stdin_open=True)


def test_the_listing_then_the_names_we_answer_with_come_back_as_one_tar(tmp_path) -> None:
    run = _run_dir(tmp_path)
    # A section that reads stdin must not eat the names meant for tar: sections read /dev/null.
    cmds = {"manifest": rundir_sync.manifest_command(str(run)), "greedy": "cat"}
    conv = _start(build_script(cmds, NONCE, then=rundir_sync.tar_command(str(run))))
    probe = _read_probe(conv, NONCE, 1 << 20, "node01")
    sections = split_sections(probe.stdout, NONCE)
    assert probe.ended is None and sections["greedy"].output == b""
    assert set(rundir_sync.parse_manifest(sections["manifest"].output)) == {"logs/node01/rank-0.log", "run.json"}

    conv.send(GO + b"logs/node01/rank-0.log\0")
    conv.close_stdin()
    ts = TarStream(conv, first=probe.rest)
    m = ts.next()
    sink = io.BytesIO()
    ts.copy_to(sink, m.size)
    assert (m.name, sink.getvalue()) == ("logs/node01/rank-0.log", b"step 1\n")
    assert ts.next() is None  # only what we named
    assert conv.finish().exit_code == 0


def test_without_go_the_script_ends_cleanly_and_runs_nothing_more(tmp_path) -> None:
    flag = tmp_path / "fetched"
    conv = _start(build_script({"manifest": "echo listed"}, NONCE, then=f"touch {flag}"))
    probe = _read_probe(conv, NONCE, 1 << 20, "node01")
    assert split_sections(probe.stdout, NONCE)["manifest"].output == b"listed\n"
    res = _end(conv, probe)
    assert res.exit_code == 0 and not flag.exists()


def test_a_script_that_dies_before_the_handoff_is_finished_with_its_status_and_stderr(tmp_path) -> None:
    conv = _start(
        build_script({"manifest": "echo listed"}, NONCE, then="true").replace(
            "printf", "echo gone >&2; exit 9; printf", 1
        )
    )
    probe = _read_probe(conv, NONCE, 1 << 20, "node01")
    assert probe.ended is not None and probe.ended.exit_code == 9 and b"gone" in probe.ended.stderr
    assert _end(conv, probe) is probe.ended


# Pieces of a script's output: real markers, near misses (the nonce's prefix with a bad tail, another
# nonce), and plain text, in any order: what the output of a host's commands could contain.
_PIECES = st.sampled_from(
    [
        f"\n@@{NONCE} manifest 0\n",
        f"\n@@{NONCE} facts 12\n",
        f"\n@@{NONCE} Bad 1\n",
        f"\n@@{NONCE} kernel x\n",
        f"\n@@{NONCE} ",
        "\n@@fedcba9876543210 ranks 0\n",
        "\n",
        "@@",
        "a line of output",
        "7\n",
    ]
)


@given(st.lists(_PIECES, max_size=12).map("".join))
def test_sections_are_split_where_a_scan_for_the_whole_marker_splits_them(text) -> None:
    output = text.encode()
    want: dict[str, tuple[bytes, int]] = {}
    pos = 0
    for m in re.finditer(rb"\n@@" + NONCE.encode() + rb" ([a-z_]+) (\d+)\n", output):
        want[m.group(1).decode()] = (output[pos : m.start()], int(m.group(2)))
        pos = m.end()
    got = split_sections(output, NONCE)
    assert {k: (v.output, v.exit_code) for k, v in got.items()} == want
