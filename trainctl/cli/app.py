"""The `trainctl` console script: the Typer app and the one place errors become exit codes.

Exit codes: trainctl.exit_codes.ExitCode, one meaning per code, listed in `trainctl --help`.
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import typer

from trainctl import __version__
from trainctl.cli.config_file import ENV_PREFIX, load_default_map, settle_environment_names
from trainctl.cli.console import err, setup_logging, styled
from trainctl.errors import TrainctlError, UsageError
from trainctl.exit_codes import ExitCode, help_text

HELP_OPTION_NAMES = ["-h", "--help"]
app = typer.Typer(
    name="trainctl",
    help="SRE diagnosis of distributed training runs: launch, collect, diagnose, evict, playbooks.",
    epilog=help_text(),
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)

_state = {"verbose": 0}


def _print_version(value: bool) -> None:
    # Eager: runs before the command is required, so `trainctl --version` alone works.
    if value:
        typer.echo(__version__)
        raise typer.Exit(ExitCode.OK)


@app.callback()
def _root(
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More logs on stderr; -vv shows tracebacks."),
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    _state["verbose"] = verbose
    setup_logging(verbose)


# One line per command: (name, module under trainctl.cli, function). Modules are imported when
# the app is built; keep torch imports inside command bodies so `trainctl diagnose` starts fast.
COMMANDS: list[tuple[str, str, str]] = [
    ("diagnose", "diagnose", "diagnose"),
    ("launch", "launch", "launch"),
    ("demo", "demo", "demo"),
    ("fleet-sim", "fleet", "fleet_sim"),
    ("agent", "agent", "agent"),
    ("collect", "collect", "collect"),
    ("import-metrics", "import_metrics", "import_metrics"),
    ("report", "report", "report"),
    ("export", "export", "export"),
    ("compare", "compare", "compare"),
    ("evict-node", "nodes", "evict_node"),
]
# Command groups (sub-apps): (name, module, attribute holding a typer.Typer).
GROUPS: list[tuple[str, str, str]] = [
    ("nodes", "nodes", "nodes_app"),
    ("playbook", "playbook", "app"),
]

for _name, _mod, _fn in COMMANDS:
    app.command(_name)(getattr(importlib.import_module(f"trainctl.cli.{_mod}"), _fn))
for _name, _mod, _attr in GROUPS:
    app.add_typer(getattr(importlib.import_module(f"trainctl.cli.{_mod}"), _attr), name=_name)


def main(argv: list[str] | None = None) -> None:
    # Standalone mode: Typer turns usage errors into exit 2 and typer.Exit(n) into SystemExit(n);
    # only trainctl's own errors need translating here.
    try:
        # Defaults from the TOML config file; TRAINCTL_<COMMAND>_<OPTION> and flags override them
        # (trainctl.cli.config_file).
        root = typer.main.get_command(app)
        settle_environment_names(root, HELP_OPTION_NAMES)
        default_map = load_default_map(root)
        root.main(args=argv, prog_name="trainctl", default_map=default_map, auto_envvar_prefix=ENV_PREFIX)
    except UsageError as e:
        _fail(str(e), ExitCode.USAGE)
    except TrainctlError as e:
        _fail(str(e))
    except OSError as e:
        # A file a command was told to write or read that the system refused (--out in a folder that does not
        # exist, a read-only mount, a full disk): the path and the reason, not a traceback. Commands name
        # their own inputs' failures (InputError); this is the floor under the rest.
        where = f"{e.filename}: " if e.filename else ""
        _fail(f"{where}{e.strerror or e}; check the path, its folder and its permissions (-vv: traceback)")


def _fail(message: str, code: ExitCode = ExitCode.ERROR) -> NoReturn:
    """One error line on stderr (the traceback too with -vv) and exit `code` (1 unless a usage error); called
    inside the `except`."""
    if _state["verbose"] >= 2:
        err.print_exception()
    err.print(styled("error:", "bold red", f" {message}"), highlight=False, soft_wrap=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
