"""The two consoles: data to stdout, progress/logs/errors to stderr (so `--json | jq` works).

This is the only module that configures logging handlers.
"""

from __future__ import annotations

import logging
import os
import sys

from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text


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


def setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = RichHandler(console=err, show_path=False, show_time=verbosity >= 2, markup=False)
    root = logging.getLogger("trainctl")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
