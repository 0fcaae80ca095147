"""Defaults from a TOML file; flags and the environment override it.

The file is `$TRAINCTL_CONFIG`, else `~/.config/trainctl/config.toml` (`$XDG_CONFIG_HOME` honoured);
a missing file is fine. One table per command, keys spelled as the command's long options:

    [collect]
    ssh-config = "~/.ssh/fleet.conf"
    max-workers = 8

    [diagnose]
    fail-on = "warning"

    [nodes.list]          # a command of a group: the group's table, then the command's
    json = true

Precedence (Click's): a flag on the command line, then the environment variable
`TRAINCTL_<COMMAND>_<OPTION>` (`TRAINCTL_COLLECT_MAX_WORKERS=8`, `TRAINCTL_NODES_LIST_JSON=1`), then
this file, then the built-in default. An unknown command or option, or a file that is not valid TOML,
is a one-line error naming the file and the key, before anything runs.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainctl.errors import InputError

# Typer builds Click commands (its own vendored Click since 0.2x): read them by their attributes,
# `commands` on a group and `params` with `param_type_name == "option"`, not by Click's classes.
Command = Any

ENV_PREFIX = "TRAINCTL"
CONFIG_ENV = "TRAINCTL_CONFIG"


def config_path() -> Path:
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "trainctl" / "config.toml"


def _acts_and_exits(p: Any) -> bool:
    """--help, --version, --install-completion, --show-completion: a callback that acts and exits, no value for the
    command (eager, or not passed to it)."""
    return bool(p.is_eager or not p.expose_value)


def _options(cmd: Command) -> dict[str, str]:
    """`max-workers` / `json` (each long option without dashes, and the parameter's own name) -> name."""
    out: dict[str, str] = {}
    for p in cmd.params:
        # --version and the completion flags act and exit: a default for them would make every command do that
        if getattr(p, "param_type_name", None) != "option" or p.name is None or _acts_and_exits(p):
            continue
        out[p.name] = p.name
        for opt in p.opts:
            if opt.startswith("--"):
                out[opt[2:]] = p.name
    return out


def _convert(path: Path, where: str, cmd: Command, table: Mapping[str, Any]) -> dict[str, Any]:
    subcommands = getattr(cmd, "commands", None) or {}
    known = _options(cmd)
    out: dict[str, Any] = {}
    for key, value in table.items():
        here = f"{where}.{key}" if where else key
        if key in subcommands:
            if not isinstance(value, Mapping):
                raise InputError(f"{path}: [{here}] must be a table of {key}'s options")
            out[key] = _convert(path, here, subcommands[key], value)
        elif key in known:
            out[known[key]] = value
        else:
            choices = sorted(subcommands) + sorted(k for k in known if "_" not in k)
            what = "commands and options" if subcommands else "options"
            raise InputError(
                f"{path}: unknown key {here!r}; {what} of {where or 'trainctl'}: {', '.join(choices) or '(none)'}"
            )
    return out


def _say_the_source_of_a_bad_value(p: Any, legacy_env: str) -> None:
    """'Invalid value for --fail-on' names where the value came from: the variable that was set, the config file,
    or nothing more for a flag (Click named the variable whatever the source, a config file's value included)."""
    consume, source = p.consume_value, {"name": ""}

    def consume_value(ctx: Any, opts: Any) -> Any:
        value, src = consume(ctx, opts)
        source["name"] = getattr(src, "name", "")
        return value, src

    def get_error_hint() -> str:
        hint = " / ".join(f"'{o}'" for o in p.opts)
        if source["name"] == "ENVIRONMENT":
            names = [n for n in (p.envvar, legacy_env) if isinstance(n, str) and os.environ.get(n)]
            return f"{hint} (env var: '{names[0] if names else p.envvar}')"
        if source["name"] == "DEFAULT_MAP":
            return f"{hint} (from the config file {config_path()})"
        return hint

    p.consume_value, p.get_error_hint = consume_value, get_error_hint


def settle_environment_names(cmd: Command, help_option_names: list[str], prefix: str = ENV_PREFIX) -> None:
    """Name each option's variable `TRAINCTL_<COMMAND>_<OPTION>` after its long option, as documented (Click would
    name it after the Python parameter: `--json` read TRAINCTL_NODES_LIST_JSON_OUT; that name still works,
    Click's fallback). --help, --version and the completion flags act and exit, so no variable sets them
    (TRAINCTL_VERSION=0.1.0 in a CI image made every command print the version and exit 0)."""
    ctx = type(cmd).context_class(cmd, help_option_names=help_option_names)
    for p in [*cmd.params, cmd.get_help_option(ctx)]:
        if p is None or getattr(p, "param_type_name", None) != "option":
            continue
        if _acts_and_exits(p):
            p.allow_from_autoenv = False
            continue
        longs = [o[2:] for o in p.opts if o.startswith("--")]
        if p.envvar is None and longs:
            p.envvar = f"{prefix}_{longs[0].replace('-', '_').upper()}"
        _say_the_source_of_a_bad_value(p, f"{prefix}_{p.name.upper()}")
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        settle_environment_names(sub, help_option_names, f"{prefix}_{name.replace('-', '_').upper()}")


def load_default_map(root: Command, path: Path | None = None) -> dict[str, Any]:
    """The file's defaults as Click's default_map ({command: {param: value}}); {} without a file."""
    path = path or config_path()
    if not path.is_file():
        if os.environ.get(CONFIG_ENV):
            raise InputError(f"{path}: no such config file (from ${CONFIG_ENV}); create it or unset the variable")
        return {}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc}); fix the file or move it away") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the config file ({exc.strerror})") from exc
    return _convert(path, "", root, doc)
