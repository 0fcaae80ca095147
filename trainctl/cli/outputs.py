"""Output paths a command is given, checked before it reads or writes anything.

A command that reads PATH and writes FILE must never write FILE onto PATH: `export RUN --perfetto
RUN/run.json` replaced the run's rank map with a trace, `report x.log --out x.log` the log with HTML,
both with exit 0. Anything inside an input directory is refused too (a run dir or dataset is read
whole, by this command and the next one), except a file the command itself puts there by default.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainctl.errors import UsageError

__all__ = ["refuse_onto_input", "same_path"]


def same_path(a: Path, b: Path) -> bool:
    """Whether a and b name one file: after symlinks, or a hard link to an existing one."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet: resolve() above already compared the names
        return False


def refuse_onto_input(flag: str, output: Path, source: Path, *, allowed: Path | None = None) -> None:
    """UsageError (exit 2) when `output` is `-` (stdout is not a file these commands write), the input
    `source` itself, or inside the input directory `source` (symlinks resolved); `allowed` is the command's
    own default file there."""
    if str(output) == "-":
        # Not stdout: the writers take a path, and `-` became a file named "-" in the working directory.
        raise UsageError(f"{flag} -: this writes a file, not stdout; give a path (e.g. {flag} out.json)")
    if allowed is not None and same_path(output, allowed):
        return
    if same_path(output, source):
        what = "input directory" if source.is_dir() else "input file"
        raise UsageError(f"{flag} {output}: that is the {what} itself, which would be overwritten; pick another path")
    if source.is_dir() and output.resolve().is_relative_to(source.resolve()):
        harm = "and would overwrite one of its files" if output.exists() else "which trainctl reads whole"
        raise UsageError(f"{flag} {output}: inside the input directory {source}, {harm}; write it outside {source}")
