"""Defaults from ~/.config/trainctl/config.toml (trainctl/cli/config_file.py): the file sets them, the
environment (TRAINCTL_<COMMAND>_<OPTION>) overrides it, a flag overrides both; a bad file is one line
naming the file and the key, with nothing run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer

from trainctl.cli.app import app
from trainctl.cli.config_file import load_default_map
from trainctl.errors import InputError
from trainctl.exit_codes import ExitCode

# A log whose first finding is critical: a watchdog timeout.
LOG = (
    "[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600061 "
    "milliseconds before timing out.\n"
)


def _env(config: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TRAINCTL_CONFIG": str(config), **extra}


def test_file_then_environment_then_flag(cli, tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text(LOG)
    cfg = tmp_path / "config.toml"
    cfg.write_text('[diagnose]\nfail-on = "never"\n')
    assert cli("diagnose", log).code == ExitCode.FINDINGS  # built-in default: critical
    assert cli("diagnose", log, env=_env(cfg)).code == ExitCode.OK  # the file
    assert cli("diagnose", log, env=_env(cfg, TRAINCTL_DIAGNOSE_FAIL_ON="critical")).code == ExitCode.FINDINGS
    assert cli("diagnose", log, "--fail-on", "critical", env=_env(cfg)).code == ExitCode.FINDINGS
    # the XDG location is read without TRAINCTL_CONFIG
    xdg = tmp_path / "xdg"
    (xdg / "trainctl").mkdir(parents=True)
    (xdg / "trainctl" / "config.toml").write_text('[diagnose]\nfail-on = "never"\n')
    env = {k: v for k, v in os.environ.items() if k != "TRAINCTL_CONFIG"} | {"XDG_CONFIG_HOME": str(xdg)}
    assert cli("diagnose", log, env=env).code == ExitCode.OK


@pytest.mark.parametrize(
    "text, says",
    [
        ("[diagnose]\nbogus = 1\n", "unknown key 'diagnose.bogus'; options of diagnose: fail-on, interval-s, json"),
        ("[diagnos]\nx = 1\n", "unknown key 'diagnos'; commands and options of trainctl: agent, collect"),
        ("[nodes.list]\nwide = true\n", "unknown key 'nodes.list.wide'; options of nodes.list: json"),
        ("[diagnose\n", "not valid TOML (Expected ']'"),
        ("diagnose = 3\n", "[diagnose] must be a table"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(cli, tmp_path: Path, text: str, says: str) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(text)
    r = cli("--version", env=_env(cfg))
    assert r.code == ExitCode.ERROR and str(cfg) in r.stderr and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_missing_explicit_file_and_nested_groups(tmp_path: Path) -> None:
    root = typer.main.get_command(app)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[collect]\nmax-workers = 4\nssh-config = "~/x"\n[nodes.list]\njson = true\n')
    assert load_default_map(root, cfg) == {
        "collect": {"max_workers": 4, "ssh_config": "~/x"},
        "nodes": {"list": {"json_out": True}},
    }
    os.environ["TRAINCTL_CONFIG"] = str(tmp_path / "absent.toml")
    try:
        with pytest.raises(InputError, match="no such config file"):
            load_default_map(root)
    finally:
        os.environ.pop("TRAINCTL_CONFIG")


@pytest.mark.parametrize(
    "var",
    [
        "TRAINCTL_VERSION",  # a CI image may well set it to pin the install: it must not turn diagnose into exit 0
        "TRAINCTL_HELP",
        "TRAINCTL_DIAGNOSE_HELP",
        "TRAINCTL_SHOW_COMPLETION",
        "TRAINCTL_INSTALL_COMPLETION",  # would write the user's shell rc file on every command
    ],
)
def test_the_environment_never_sets_a_flag_that_acts_and_exits(cli, tmp_path: Path, var: str) -> None:
    log = tmp_path / "w.log"
    log.write_text(LOG)
    env = {**os.environ, var: "1", "HOME": str(tmp_path)}
    r = cli("diagnose", log, "--json", env=env)
    assert r.code == ExitCode.FINDINGS and '"kind"' in r.stdout, r
    assert not (tmp_path / ".bashrc").exists() and not (tmp_path / ".bash_completions").exists()


@pytest.mark.parametrize("key", ["version = true", "show-completion = true", "help = true"])
def test_the_config_file_cannot_set_a_flag_that_acts_and_exits(cli, tmp_path: Path, key: str) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(key + "\n")
    r = cli("--version", env=_env(cfg))
    assert r.code == ExitCode.ERROR and "unknown key" in r.stderr and str(cfg) in r.stderr, r


def test_environment_names_follow_the_long_option(cli, tmp_path: Path) -> None:
    """README and config_file.py document TRAINCTL_<COMMAND>_<OPTION> (`TRAINCTL_NODES_LIST_JSON=1`), and --help
    lists the name: the option's spelling, not the Python parameter behind it (json_out, out_dir)."""
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home"), "TRAINCTL_NODES_LIST_JSON": "1"}
    r = cli("nodes", "list", env=env)
    assert r.code == ExitCode.OK and r.stdout.lstrip().startswith("{"), r
    log = tmp_path / "w.log"
    log.write_text(LOG)
    r = cli("diagnose", log, env={**os.environ, "TRAINCTL_DIAGNOSE_JSON": "1"})
    assert r.code == ExitCode.FINDINGS and r.stdout.lstrip().startswith("{"), r
    # the older name still works
    r = cli("diagnose", log, env={**os.environ, "TRAINCTL_DIAGNOSE_JSON_OUT": "1"})
    assert r.code == ExitCode.FINDINGS and r.stdout.lstrip().startswith("{"), r
    r = cli("nodes", "list", "-h", env={**os.environ, "COLUMNS": "250"})
    assert "TRAINCTL_NODES_LIST_JSON]" in r.stdout and "JSON_OUT" not in r.stdout, r.stdout


def test_a_bad_value_says_where_it_came_from(cli, tmp_path: Path) -> None:
    """A bad value from the config file was said as 'Invalid value for --fail-on (env var: TRAINCTL_DIAGNOSE_FAIL_ON)':
    the file, not the variable, holds it. The hint names the file, the variable, or nothing for a typed flag."""
    log = tmp_path / "w.log"
    log.write_text(LOG)
    cfg = tmp_path / "config.toml"
    cfg.write_text("[diagnose]\nfail-on = 3\n")

    def said(r) -> str:
        assert r.code == 2 and "Traceback" not in r.stderr, r
        return "".join(r.stderr.split())  # rich wraps the panel

    text = said(cli("diagnose", log, env=_env(cfg)))
    assert "".join(str(cfg).split()) in text and "envvar" not in text, text
    text = said(cli("diagnose", log, env={**os.environ, "TRAINCTL_DIAGNOSE_FAIL_ON": "bogus"}))
    assert "TRAINCTL_DIAGNOSE_FAIL_ON" in text, text
    text = said(cli("diagnose", log, "--fail-on", "bogus"))
    assert "envvar" not in text and "TRAINCTL_DIAGNOSE_FAIL_ON" not in text, text
