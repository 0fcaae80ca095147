"""The two consoles: data to stdout, progress/logs/errors to stderr (so `--json | jq` works).

This is the only module that configures logging handlers.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

from trainctl.exit_codes import ExitCode


def _width() -> int | None:
    # Not a terminal (pipes, tests, CI): wide enough that summaries are not wrapped mid-word.
    return None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "160"))


# markup=False: what these consoles print carries data (paths, host names, log lines, reasons from
# findings), and rich markup in data (`[/x]`) must print as it is, not crash. Style goes through
# `styled` (Text), never through markup in a format string.
out = Console(width=_width(), soft_wrap=False, markup=False)
err = Console(stderr=True, width=_width(), markup=False)


def styled(head: str, style: str, rest: str = "") -> Text:
    """`head` in `style`, then `rest` as plain text (no markup is ever parsed)."""
    return Text.assemble((head, style), rest)


def exit_if_skipped(skipped: Sequence[str]) -> None:
    """Exit 6 (ExitCode.PARTIAL) when the command did its work but some input was skipped (each said on stderr as it
    was met): automation must tell a report, trace or comparison of part of a run from one of all of it."""
    if skipped:
        raise typer.Exit(ExitCode.PARTIAL)


def setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = RichHandler(console=err, show_path=False, show_time=verbosity >= 2, markup=False)
    root = logging.getLogger("trainctl")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
