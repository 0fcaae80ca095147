"""CLI habits people expect (issue 17 item 6): --version, shell completion."""

from __future__ import annotations

from trainctl import __version__


def test_version(cli) -> None:
    r = cli("--version")
    assert r.code == 0 and r.stdout.strip() == __version__


def test_bash_completion_script(cli) -> None:
    r = cli("--show-completion", "bash")
    assert r.code == 0 and "_trainctl_completion" in r.stdout and "complete " in r.stdout
