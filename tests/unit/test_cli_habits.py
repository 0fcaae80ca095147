"""CLI habits people expect (issue 17 item 6): --version, shell completion."""

from __future__ import annotations

from trainctl import __version__


def test_version(cli) -> None:
    r = cli("--version")
    assert r.code == 0 and r.stdout.strip() == __version__


def test_bash_completion_script(cli) -> None:
    # What `trainctl --install-completion` makes bash run. `--show-completion` takes no shell name
    # (a flag: typer detects the calling shell from the process tree, which fails under a
    # non-shell parent such as a backgrounded test run), so the test asks for bash by name.
    import os

    r = cli(env={**os.environ, "_TRAINCTL_COMPLETE": "source_bash"})
    assert r.code == 0 and "_trainctl_completion" in r.stdout and "complete " in r.stdout
