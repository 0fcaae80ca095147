"""The launch request: one declaration per option, from which the CLI, launch.json and the relaunch argv follow."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import typer

from trainctl.cli.launch import launch, request_from_argv
from trainctl.errors import InputError
from trainctl.ops.launch import run_control
from trainctl.ops.launch.request import REQUEST_SCHEMA_VERSION, LaunchRequest, option_decls
from trainctl.ops.launch.run_control import record_launch


def _command():
    app = typer.Typer(add_completion=False)
    app.command()(launch)
    return typer.main.get_command(app)


def test_the_cli_options_are_the_request_fields() -> None:
    params = {p.name: p for p in _command().params}
    decls = option_decls()
    assert list(params) == [f.name for f in fields(LaunchRequest)]
    for name, decl in decls.items():
        p = params[name]
        if decl.flag is None:
            assert p.param_type_name == "argument"
        else:
            assert p.opts[0] == decl.flag and p.help == decl.help


def test_request_round_trips_through_launch_json_and_argv(tmp_path) -> None:
    argv = ["--hosts", "node[01-03]", "--spares", "node04", "--nproc-per-node", "4", "--env", "A=1", "--env", "B=x=y"]
    argv += ["--hang-timeout", "30", "--fail-slow-ratio", "2", "--allow-shrink", "--", "/w/train.py", "--lr", "1e-3"]
    req = request_from_argv(argv, cwd=tmp_path).validate()
    assert req.host_names() == ("node01", "node02", "node03") and req.env() == {"A": "1", "B": "x=y"}
    assert req.script == "/w/train.py" and req.script_args == ("--lr", "1e-3")
    back = LaunchRequest.from_dict(json.loads(json.dumps(req.to_dict())))
    assert back == req
    assert request_from_argv(req.to_argv(), cwd="/elsewhere") == req


def test_relative_paths_are_made_absolute_against_the_launch_cwd(tmp_path) -> None:
    req = request_from_argv(["--hosts", "n1", "--run-dir", "r", "--checkpoint-dir", "ck", "--", "t.py"], cwd="/home/u")
    assert (req.run_dir, req.checkpoint_dir, req.script) == (Path("/home/u/r"), Path("/home/u/ck"), "/home/u/t.py")


def test_relaunch_drops_drills_and_mode_options() -> None:
    req = request_from_argv(["--hosts", "n1,n2", "--inject", "hang:rank=1,step=5", "--steps", "9"], cwd="/")
    new = req.relaunched(hosts=["n1", "n3"], spares=[], run_dir="/x/r1", remote_run_dir="/r/r1")
    argv = new.to_argv(relaunch=True)
    assert argv[:6] == ["--hosts", "n1,n3", "--run-dir", "/x/r1", "--remote-run-dir", "/r/r1"]
    assert "--inject" not in argv and "--hosts-local" not in argv and "--local" not in argv
    assert argv[argv.index("--steps") + 1] == "9"


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "the request is not an object"),
        ({"nproc_per_node": "2"}, "nproc_per_node has '2', not a int"),
        ({"inject": "crash"}, "inject must be a list of strings"),
        ({"hosts": "n1", "colour": "red"}, "unknown option(s) colour"),
    ],
)
def test_a_wrong_launch_json_is_one_line(doc, message) -> None:
    with pytest.raises(InputError) as e:
        LaunchRequest.from_dict(doc, where="RUN/launch.json")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_old_argv_record_is_refused_with_the_command_to_run(tmp_path) -> None:
    (tmp_path / "launch.json").write_text(json.dumps({"argv": ["--hosts", "n1,n2", "--steps", "5"], "cwd": "/"}))
    with pytest.raises(
        InputError, match=r"older trainctl .*relaunch by hand with `trainctl launch --hosts n1,n2 --steps 5`"
    ):
        run_control.launch_options(tmp_path)


def test_stored_request_is_schema_2_and_read_back(tmp_path) -> None:
    req = request_from_argv(["--hosts", "n1,n2", "--python", "/opt/venv/bin/python"], cwd=tmp_path)
    record_launch(tmp_path, req)
    doc = json.loads((tmp_path / "launch.json").read_text())
    assert doc["schema_version"] == REQUEST_SCHEMA_VERSION == 2 and doc["request"]["python"] == "/opt/venv/bin/python"
    assert run_control.launch_options(tmp_path).request == req


@pytest.mark.parametrize(
    "args, message",
    [
        (["--local", "--env", "FOO"], "--env 'FOO': expected NAME=VALUE"),
        (["--local", "--env", "1X=2"], "--env '1X=2': expected NAME=VALUE"),
        (["--hosts", "node01:notaport"], "notaport"),
        (["--hosts", "node01:70000"], "70000"),
        (["--hosts", "bad_host!"], "bad_host!"),
        (["--hosts", "node[1-9999999]"], "range too large"),
        (["--local", "--hosts-local", "0"], "--hosts-local 0: must be >= 1"),
        (["--local", "--hang-timeout", "nan"], "--hang-timeout nan"),
        (["--local", "--inject", "crash:rank=9,step=3"], "rank 9 does not exist (world size 2)"),
        (["--hosts", "n1,n2", "--spares", "n2"], "a host appears twice"),
        (["--local", "--spares", "n2"], "--spares applies to --hosts"),
    ],
)
def test_bad_launch_options_are_one_line_errors(cli, args, message) -> None:
    r = cli("launch", *args)
    assert r.code == 1, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_supervisor_checks_drill_targets_as_the_cli_does(tmp_path) -> None:
    """A spec from a file (not from the CLI) is checked by the same rule: a spare may take an xid drill,
    a host outside the run may not, and a rank past the world size gets the same hint as on the CLI."""
    from trainctl.ops.launch.supervisor import HostsSpec, validate

    def spec(*inject: str) -> HostsSpec:
        return HostsSpec(
            run_dir=tmp_path / "r", remote_run_dir="/tmp/r", run_id="r", hosts=("node01", "node02"),
            spares=("node03",), nproc_per_node=2, inject=inject, ledger_home=tmp_path / "home",
        )  # fmt: skip

    validate(spec("xid:host=node03,code=79,step=5"))  # a spare stands in for an evicted host
    with pytest.raises(InputError, match=r"host 'node09' is not in this run \(node01, node02, node03\)"):
        validate(spec("xid:host=node09,code=79,step=5"))
    with pytest.raises(InputError, match=r"rank 4 does not exist \(world size 4\); pick a rank below 4"):
        validate(spec("crash:rank=4,step=3"))
