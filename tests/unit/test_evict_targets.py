"""Eviction targets: one host (RFC 1123 name or IP), or a hostlist whose every member is in the run.

Pure checks (trainctl.ops.evict.targets); the CLI-level refusals, with a fake scheduler that must
never be called, are in test_evict_cli_refusals.py."""

from __future__ import annotations

import pytest

from trainctl.ops.evict.targets import MAX_EXPANSION, TargetError, check_host_name, expand_targets, resolve_targets

RUN = frozenset({"node01", "node02", "node03", "node04"})


@pytest.mark.parametrize("name", ["node01", "gpu-a100-17.rack3.example.com", "10.1.2.3", "fe80::1", "a", "7node"])
def test_host_names_and_ips_pass(name: str) -> None:
    assert check_host_name(name) == name
    assert expand_targets(name) == [name]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("ALL", "a scheduler reads it as every node"),
        ("all", "a scheduler reads it as every node"),
        ("-x", "starts with '-'"),
        ("--selector=x", "starts with '-'"),
        ("-l", "starts with '-'"),
        ("app=web", "is a selector (key=value)"),
        ("node*", "is a glob pattern"),
        ("node?1", "is a glob pattern"),
        ("node{1,2}", "is a glob pattern"),
        ("", "empty host name"),
        ("node 01", "holds whitespace"),
        ("node_01", "is not an RFC 1123 host name or an IP address"),
        ("node01-", "is not an RFC 1123 host name or an IP address"),
        ("a" * 64, "is not an RFC 1123 host name or an IP address"),  # a label is at most 63 characters
        ("$(id)", "is not an RFC 1123 host name or an IP address"),
        ("`id`", "is not an RFC 1123 host name or an IP address"),
    ],
)
def test_refused_names_say_why(value: str, why: str) -> None:
    with pytest.raises(TargetError) as ei:
        expand_targets(value)
    assert why in str(ei.value)
    assert "\n" not in str(ei.value)


def test_hostlists_expand_with_python_hostlist_and_each_member_is_checked() -> None:
    assert expand_targets("node[02-03]") == ["node02", "node03"]
    assert expand_targets("node[01,03],node04") == ["node01", "node03", "node04"]
    with pytest.raises(TargetError, match="starts with '-'"):
        expand_targets("node01,-l")  # an option hidden in a list
    with pytest.raises(TargetError, match="a scheduler reads it as every node"):
        expand_targets("node01,ALL")
    with pytest.raises(TargetError, match="not a valid Slurm hostlist"):
        expand_targets("node[03-01]")
    with pytest.raises(TargetError, match=f"expands to {MAX_EXPANSION + 1} hosts"):
        expand_targets(f"n[0-{MAX_EXPANSION}]")


def test_membership_when_the_run_is_known() -> None:
    assert resolve_targets(["node[02-03]"], members=RUN, run_label="r-1") == ("node02", "node03")
    assert resolve_targets(["node02", "node02,node03"], members=RUN) == ("node02", "node03")
    with pytest.raises(TargetError) as ei:
        resolve_targets(["node[01-99]"], members=RUN, run_label="r-1")
    assert str(ei.value) == (
        "'node[01-99]' names node05, node06, node07, node08, node09 and 90 more, not among the hosts or spares "
        "of run r-1 (node01, node02, node03, node04); name hosts of the run"
    )
    with pytest.raises(TargetError, match="'node09' names node09, not among the hosts or spares"):
        resolve_targets(["node09"], members=RUN)


def test_without_a_run_only_single_hosts() -> None:
    assert resolve_targets(["node09"], members=None) == ("node09",)
    with pytest.raises(TargetError, match="names several hosts, and no run is known"):
        resolve_targets(["node[01-02]"], members=None)
    with pytest.raises(TargetError, match="names several hosts, and no run is known"):
        resolve_targets(["node01,node02"], members=None)
    with pytest.raises(TargetError, match="no host to evict"):
        resolve_targets([], members=RUN)


def test_a_target_with_the_runs_ssh_port_is_the_host() -> None:
    # launch --hosts node07:2222: the supervisor and SREs name the host as the run does; the ledger
    # and the scheduler get the machine (scontrol has no ports), spelled as the run spells it
    run = frozenset({"node01:2222", "Node07:2222", "[2001:db8::9]:22"})
    assert check_host_name("node07:2222") == "node07:2222"
    assert resolve_targets(["node07:2222"], members=run) == ("Node07",)
    assert resolve_targets(["NODE07", "node07:22"], members=run) == ("Node07",)
    assert resolve_targets(["2001:DB8:0::9"], members=run) == ("2001:db8::9",)
    assert resolve_targets(["node01:2222,[2001:db8::9]:22"], members=run) == ("node01", "2001:db8::9")
    assert resolve_targets(["[2001:db8::9]:22"], members=None) == ("2001:db8::9",)
    assert resolve_targets(["node09:2222"], members=None) == ("node09",)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("ALL:22", "'ALL' is not a host: a scheduler reads it as every node"),  # the host part is checked too
        ("-l:22", "starts with '-'"),
        ("node_01:22", "'node_01' is not an RFC 1123 host name"),
        ("node07:0", "host 'node07:0' has port '0'; a port is a number in 1..65535"),
        ("node07:x", "host 'node07:x' has port 'x'"),
        ("[node07]:22", "is not a valid Slurm hostlist"),  # brackets around a name are a range
        ("root@node07", "host 'root@node07' names a login user; name the host to evict, e.g. node07"),
    ],
)
def test_refused_targets_with_a_port_say_why(value: str, why: str) -> None:
    with pytest.raises(TargetError) as ei:
        expand_targets(value)
    assert why in str(ei.value)
