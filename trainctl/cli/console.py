"""The two consoles: data to stdout, progress/logs/errors to stderr (so `--json | jq` works).

This is the only module that configures logging handlers.
"""

from __future__ import annotations

import logging
import os
import sys

from rich.console import Console
from rich.logging import RichHandler


def _width() -> int | None:
    # Not a terminal (pipes, tests, CI): wide enough that summaries are not wrapped mid-word.
    return None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "160"))


out = Console(width=_width(), soft_wrap=False)
err = Console(stderr=True, width=_width())


def setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = RichHandler(console=err, show_path=False, show_time=verbosity >= 2, markup=False)
    root = logging.getLogger("trainctl")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
