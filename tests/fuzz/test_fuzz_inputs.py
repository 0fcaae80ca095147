"""Every input a user or a host can feed, generated (issue 15): no traceback, no hang, bounded work.

hypothesis, seeded (derandomize: CI sees the same inputs every run), 1,000 generated inputs per
parser. The only exceptions allowed out of a parser are trainctl's own (TrainctlError: a one-line
error naming the input and the fix); anything else is a bug this suite exists to find. A test that
runs past 10 minutes fails (pytest-timeout): no input may hang a parser.
"""

from __future__ import annotations

import gzip
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from trainctl.errors import TrainctlError
from trainctl.findings import Category, Finding, FindingKind, Report, Severity

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(600)]

N = 1000
FUZZ = settings(
    max_examples=N,
    derandomize=True,
    # No per-example deadline: on a loaded CI machine a file-system example can take seconds, and a
    # flaky deadline teaches nothing. Unbounded work is caught by the module's timeout instead (the
    # quadratic-pattern and bomb cases have their own tests with sizes that would take hours).
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    database=None,
)

# JSON values as hostile writers produce them: wrong types, huge and negative integers (past int64,
# the smallest int64), NaN/inf, deep nesting, undecodable text.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([-(2**63), 2**63 - 1, 2**64, -1, 0])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
json_values = st.recursive(
    _scalars, lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=12), c, max_size=6), max_leaves=30
)


def _allowed(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except TrainctlError as exc:
        assert "\n" not in str(exc).strip() or "Traceback" not in str(exc), str(exc)
        return None


# -- launch.json, run.json, error files --------------------------------------------------------


def _keyed(keys: list[str]):
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=8), json_values, max_size=len(keys) + 2)


def _launch_keys() -> list[str]:
    from dataclasses import fields

    from trainctl.ops.launch.request import LaunchRequest

    return [f.name for f in fields(LaunchRequest)]


@FUZZ
@given(doc=_keyed(_launch_keys()) | json_values)
def test_launch_json(doc) -> None:
    from trainctl.ops.launch.request import LaunchRequest

    req = _allowed(LaunchRequest.from_dict, doc, where="launch.json")
    if req is not None:
        _allowed(req.validate)
        req.to_argv(relaunch=True)


_RUN_KEYS = ["run_id", "world_size", "nproc_per_node", "hosts", "groups", "layout", "script", "extra", "schema_version"]


@FUZZ
@given(doc=_keyed(_RUN_KEYS) | json_values, raw=st.binary(max_size=64))
def test_run_json(doc, raw) -> None:
    from trainctl.rundir import read_run_info

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "run.json").write_text(json.dumps(doc, allow_nan=True))
        info = _allowed(read_run_info, d)
        if info is not None:
            info.rank_to_host() if hasattr(info, "rank_to_host") else None
        (Path(d) / "run.json").write_bytes(raw)
        _allowed(read_run_info, d)


@FUZZ
@given(
    error=st.fixed_dictionaries({"message": json_values}) | json_values,
    numerics=_keyed(["rank", "step", "loss", "timestamp_ns"]) | json_values,
    name=st.sampled_from(["rank-0.json", "rank-7.json", "rank-x.json", "rank-99999999999999999999.json"]),
    hang=_keyed(["reason", "stale_ranks", "detected_ts_ns", "hang_timeout_s"]) | json_values,
)
def test_error_and_numerics_files(error, numerics, name, hang) -> None:
    from trainctl.analyzers.launcher_hang import launcher_hang_finding
    from trainctl.analyzers.root_cause import findings_from_run_events
    from trainctl.ops.diagnose.run_events import parse_run_dir_events

    with tempfile.TemporaryDirectory() as d:
        for sub, doc in (("errors", error), ("numerics", numerics)):
            (Path(d) / sub).mkdir()
            (Path(d) / sub / name).write_text(json.dumps(doc, allow_nan=True))
        (Path(d) / "hang.json").write_text(json.dumps(hang, allow_nan=True))  # the launcher's hang record
        tables = _allowed(parse_run_dir_events, Path(d), None)
        for t in (tables or {}).values():
            if "event" in t.column_names:
                findings_from_run_events(t.to_pylist(), {})
                launcher_hang_finding(t.to_pylist(), None, None, {})


# -- host lists and hostfiles ------------------------------------------------------------------

host_text = st.lists(
    st.sampled_from(
        list("node0123456789[]-,.:_ \n\t#@!/*ALabc") + ["..", "ALL", "--selector=x", "\0", "node[1-99999999]"]
    ),
    max_size=30,
).map("".join)


@FUZZ
@given(spec=host_text)
def test_host_specs(spec) -> None:
    from trainctl.inventory import parse_hosts

    hosts = _allowed(parse_hosts, spec)
    for h in hosts or ():
        assert h.name and not h.name.startswith("-") and "\0" not in h.name


@FUZZ
@given(text=host_text)
def test_hostfiles(text) -> None:
    from trainctl.inventory import parse_hosts

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        _allowed(parse_hosts, f.name)
    finally:
        Path(f.name).unlink()


# -- logs, stacks, Flight Recorder dumps --------------------------------------------------------

log_lines = st.lists(
    st.sampled_from(
        [
            "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<41230> with error 12",
            "[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout",
            "NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "loss nan",
            "[" * 200,
            "Traceback (most recent call last):",
        ]
    )
    | st.text(max_size=200),
    max_size=30,
)


@FUZZ
@given(lines=log_lines, junk=st.binary(max_size=200))
def test_log_text(lines, junk) -> None:
    from trainctl.collectors.logs import parse_log_text

    text = "\n".join(lines) + junk.decode("utf-8", "replace")
    _allowed(parse_log_text, text, "fuzz.log")


@settings(FUZZ, max_examples=200)
@given(lines=log_lines, cut=st.integers(min_value=0, max_value=400))
def test_log_files_gzip_truncated(lines, cut) -> None:
    from trainctl.collectors.logs import parse_log_file

    data = gzip.compress(("\n".join(lines)).encode())
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "rank-0.log.gz"
        p.write_bytes(data[: cut or len(data)])
        _allowed(parse_log_file, p)


@FUZZ
@given(text=st.text(max_size=400), lines=log_lines)
def test_stacks(text, lines) -> None:
    from trainctl.collectors.stacks import parse_dump_traceback, parse_pyspy_dump

    blob = text + "\n".join(lines) + '\nThread 0x1 (idle): "MainThread"\n    wait (torch/x.py:12)\n'
    _allowed(parse_pyspy_dump, blob, rank=0)
    _allowed(parse_dump_traceback, blob, rank=0) if parse_dump_traceback.__code__.co_argcount >= 1 else None


_sections = st.lists(
    st.tuples(
        st.sampled_from(["=== Rank {r}: http://h{r}:1/handler/dump_traceback? ===", "=== Rank {r}: {junk} ===",
                         "PARTIAL DATA: {r}/2 workers responded", "  Rank {r}: {junk}", "Error: 5{r}",
                         "Thread 0x{r} (most recent call first):", '  File "{junk}", line {r} in all_reduce',
                         '  File "/t/torch/distributed/distributed_c10d.py", line {r} in barrier',
                         '  File "/job/x.py", line {r} in <module>']),
        st.integers(min_value=-3, max_value=2**40),
        st.text(max_size=20),
    ),
    max_size=30,
)  # fmt: skip


@settings(FUZZ, max_examples=300)
@given(parts=_sections, stamps=st.lists(st.integers(min_value=0, max_value=59), min_size=1, max_size=3))
def test_torch_debug_dumps(parts, stamps) -> None:
    from trainctl.analyzers.stack_hangs import analyze_stack_hangs
    from trainctl.collectors.torch_debug_dumps import parse_debug_dump, read_debug_dumps

    text = "\n".join(t.format(r=r, junk=j) for t, r, j in parts)
    _allowed(parse_debug_dump, text)
    with tempfile.TemporaryDirectory() as d:
        for sec in stamps:
            Path(d, f"stacks_20261126_0920{sec:02d}.txt").write_text(text, errors="surrogateescape")
        got = _allowed(read_debug_dumps, d)
        if got is not None:
            _allowed(analyze_stack_hangs, got[0].to_pandas(), world=2)


_ENTRY_KEYS = ["record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
               "time_created_ns", "state", "input_sizes", "output_sizes", "frames", "is_p2p", "retired"]  # fmt: skip
fr_dumps = (
    st.fixed_dictionaries(
        {
            "entries": st.lists(_keyed(_ENTRY_KEYS), max_size=6) | json_values,
            "pg_config": json_values,
            "pg_status": json_values,
            "rank": json_values,
            "version": json_values,
        }
    )
    | json_values
)


@FUZZ
@given(doc=fr_dumps, pickled=st.booleans())
def test_flight_recorder_dumps(doc, pickled) -> None:
    import pickle

    from trainctl.collectors.flight_recorder import dumps_to_tables, load_dump

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "fr" / "node01" / "rank-0.pkl"
        p.parent.mkdir(parents=True)
        p.write_bytes(pickle.dumps(doc) if pickled else json.dumps(doc, allow_nan=True).encode())
        dump = _allowed(load_dump, p, root=Path(d))
        if dump is not None:
            _allowed(dumps_to_tables, [dump])


# -- playbooks, audit trails, the renderer -----------------------------------------------------

yaml_text = st.lists(
    st.sampled_from(
        [
            "name: x",
            "steps:",
            "  - id: a",
            "    action: collect",
            "    timeout_s: .nan",
            "? [a, b]\n: 1",
            "&a [*a]",
            "- &x [1]\n- *x",
            "min_confidence: 2",
            "    with: {hosts: '*'}",
            "inputs: {a: 1}",
            "!!python/object:os.system",
        ]  # fmt: skip
    )
    | st.text(max_size=40),
    max_size=12,
)


@FUZZ
@given(lines=yaml_text)
def test_playbook_yaml(lines) -> None:
    from trainctl.ops.playbook.validation import parse_playbook

    _allowed(parse_playbook, "\n".join(lines), "fuzz.yaml")


@FUZZ
@given(data=st.binary(max_size=300))
def test_audit_trails(data) -> None:
    from trainctl.jsonl import append_record, read_records

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "audit.jsonl"
        p.write_bytes(data)
        before = read_records(p)
        append_record(p, {"n": 1})
        after = read_records(p)
        assert after[-1] == {"n": 1} and len(after) >= 1
        assert len(after) <= len(before) + 2


@FUZZ
@given(summary=st.text(max_size=80) | st.sampled_from(["[/x]", "[bold]", "[/]", "[link=x]y[/link]", "\x1b[31m"]),
       host=st.text(max_size=20))  # fmt: skip
def test_renderer_prints_data_as_data(summary, host) -> None:
    from trainctl.cli.render import findings_table

    f = Finding(FindingKind.CRASH, Severity.CRITICAL, summary, Category.EXCEPTION, (host,), (1,), 0.9, {"x": summary})
    con = Console(file=io.StringIO(), width=200, markup=False)
    con.print(findings_table(Report(None, (f,), source=summary, source_kind="run_dir")))
    if summary.startswith("["):  # markup-looking data is printed as it is, not interpreted
        assert summary in con.file.getvalue()
