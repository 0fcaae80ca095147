"""The CLI starts without the heavy libraries: every `trainctl` call (one per host in a fan-out
script, one per playbook step) pays for what the app imports at start-up. DuckDB, pandas and
pyarrow.dataset load only when `diagnose` runs; torch only in the runtime.

Each check runs in a fresh interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "pandas", "duckdb", "pyarrow.dataset")


def _modules_after(code: str) -> dict[str, bool]:
    probe = code + f"\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_main(*argv: str) -> str:
    return (
        "from trainctl.cli.app import main\n"
        f"try:\n    main({list(argv)!r})\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
    )


@pytest.mark.parametrize(
    "code",
    [
        "import trainctl.cli.app",
        _run_main("--help"),
        _run_main("collect", "--help"),
        _run_main("diagnose", "--help"),
        # What `trainctl collect` runs: SSH fan-out and Parquet writes, no analyzers.
        "import trainctl.cli.app, trainctl.ops.collect.collection",
    ],
    ids=["import", "help", "collect-help", "diagnose-help", "collect-ops"],
)
def test_start_up_imports_no_heavy_library(code: str) -> None:
    assert _modules_after(code) == {m: False for m in HEAVY}


def test_diagnose_still_loads_its_analyzers_when_it_runs(tmp_path) -> None:
    # The lazy import must happen: diagnose on an empty dir fails with trainctl's one-line error,
    # after importing the diagnosis wiring (which loads DuckDB through the analyzers' registry).
    code = (
        "from trainctl.cli.app import main\n"
        f"try:\n    main(['diagnose', {str(tmp_path)!r}, '--json'])\nexcept SystemExit as e:\n    pass\n"
    )
    loaded = _modules_after(code)
    assert loaded["duckdb"] and not loaded["torch"]


def test_a_whole_collect_run_imports_no_heavy_library(tmp_path) -> None:
    # A real `trainctl collect` to a host where nothing listens: it connects, fails, and writes the
    # collection_status table (pa.array of Python rows, which makes pyarrow import pandas unless
    # the command keeps it out), then exits 1 because every host failed.
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host node01\n  HostName 127.0.0.1\n  Port {port}\n  ConnectTimeout 2\n")
    out = tmp_path / "ds"
    code = (
        "from trainctl.cli.app import main\n"
        f"try:\n    main(['collect', '/nonexistent/run', '--hosts', 'node01', '--ssh-config', {str(cfg)!r},"
        f" '--out', {str(out)!r}, '--kinds', 'timeline', '--json'])\nexcept SystemExit as e:\n    assert e.code == 1, e.code\n"
    )
    assert _modules_after(code) == {m: False for m in HEAVY}
    from trainctl import dataset

    rows = dataset.read_table(out, "collection_status").to_pylist()
    assert [(r["host"], r["kind"], r["ok"], r["error_type"]) for r in rows] == [
        ("node01", "timeline", False, "unreachable")
    ]


def test_pandas_still_works_after_collect_kept_it_out() -> None:
    # The same process may need pandas later (tests, notebooks): to_pandas() still gets it.
    code = (
        "from trainctl.cli.collect import _pyarrow_without_pandas\n_pyarrow_without_pandas()\n"
        "import pyarrow as pa\nassert 'pandas' not in __import__('sys').modules\n"
        "df = pa.table({'a': [1, 2]}).to_pandas()\nassert list(df['a']) == [1, 2]\n"
        "import pandas as pd\nassert pa.array(pd.Series([3, 4])).to_pylist() == [3, 4]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
