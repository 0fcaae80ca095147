"""trainctl's exit codes: one enum, one meaning per code (README and `trainctl --help` list them).

Automation branches on these, so a code is never reused for a second meaning; a new outcome gets
a new member.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode", "help_text"]


class ExitCode(IntEnum):
    OK = 0  # done; diagnose: no finding at or above --fail-on
    ERROR = 1  # trainctl could not do what was asked; one line on stderr names the value and the fix
    USAGE = 2  # the command line itself is wrong (unknown option, missing argument, an output onto the input)
    FINDINGS = 3  # diagnose: at least one finding at or above --fail-on
    RUN_FAILED = 4  # a training run that trainctl started or relaunched failed or was stopped by its supervisor
    RUN_HUNG = 5  # launch --local: the run hung; its dumps were saved before it was stopped
    PARTIAL = 6  # done, but some input was skipped (listed); diagnose: and no finding at or above --fail-on

    @property
    def meaning(self) -> str:
        return _MEANING[self]


_MEANING = {
    ExitCode.OK: "success (diagnose: no finding at or above --fail-on)",
    ExitCode.ERROR: "trainctl error: one line names the value and the fix (-vv shows the traceback)",
    ExitCode.USAGE: "usage error: unknown option, missing argument, or a value that cannot work (an output path "
    "onto the command's own input)",
    ExitCode.FINDINGS: "diagnose found something at or above --fail-on",
    ExitCode.RUN_FAILED: "the run trainctl started or relaunched failed (launch, demo, evict-node --relaunch)",
    ExitCode.RUN_HUNG: "the run hung (launch --local); dumps saved, then stopped",
    ExitCode.PARTIAL: "done, but some input was skipped, each listed on stderr (diagnose: no finding at or above "
    "--fail-on; diagnose and compare: the skipped also in the JSON's skipped)",
}


def help_text() -> str:
    """The exit-code table for `--help` (one line per code)."""
    return "Exit codes: " + "; ".join(f"{c.value} {c.meaning}" for c in ExitCode) + "."
