from __future__ import annotations

import pytest

from trainctl.errors import InventoryError
from trainctl.inventory import HostSpec, expand_nodelist, parse_hosts


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("node[01-03,7]", ["node01", "node02", "node03", "node7"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("r[1-2]-g[1,3]", ["r1-g1", "r1-g3", "r2-g1", "r2-g3"]),
        ("plain", ["plain"]),
    ],
)
def test_expand_nodelist(expr, expected) -> None:
    assert expand_nodelist(expr) == expected


def test_comma_list_with_slurm_ranges_keeps_order() -> None:
    assert [h.name for h in parse_hosts("b1,node[01-02],a1")] == ["b1", "node01", "node02", "a1"]


def test_hostfile_and_at_file(tmp_path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# cluster\nnode01 slots=8\nnode02 slots=4  # spare\n\nnode[03-04]\n")
    expected = [HostSpec("node01", 8), HostSpec("node02", 4), HostSpec("node03"), HostSpec("node04")]
    assert parse_hosts(f"@{f}") == expected
    assert parse_hosts(str(f)) == expected


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("", "empty host list"),
        ("node[01-", "unbalanced"),
        ("node[5-2]", "runs backwards"),
        ("a,a", "listed twice"),
        ("a;rm -rf", "is not a host name"),
        ("x/missing-hostfile", "cannot read hostfile"),
    ],
)
def test_bad_inventories_say_why(spec, msg) -> None:
    with pytest.raises(InventoryError, match=msg):
        parse_hosts(spec)


def test_bad_hostfile_line_names_file_and_line(tmp_path) -> None:
    f = tmp_path / "hosts"
    f.write_text("node01 slots=8\nnode02 cores=4\n")
    with pytest.raises(InventoryError, match=rf"{f}:2: cannot parse 'cores=4'"):
        parse_hosts(f"@{f}")


def test_hosts_from_the_slurm_allocation() -> None:
    from trainctl.errors import InventoryError
    from trainctl.inventory import parse_hosts

    env = {"SLURM_JOB_NODELIST": "gpu-a[001-003],gpu-b07"}
    assert [h.name for h in parse_hosts("slurm", env=env)] == ["gpu-a001", "gpu-a002", "gpu-a003", "gpu-b07"]
    assert [h.name for h in parse_hosts("slurm", env={"SLURM_NODELIST": "n[1-2]"})] == ["n1", "n2"]
    import pytest

    with pytest.raises(InventoryError, match="SLURM_JOB_NODELIST is not set"):
        parse_hosts("slurm", env={})


def test_cli_takes_hosts_from_slurm(cli, tmp_path) -> None:
    import os

    env = {**os.environ, "SLURM_JOB_NODELIST": "node[01-02]"}
    r = cli("launch", "--hosts", "slurm", "--nproc-per-node", "1", "--ssh-config", tmp_path / "none", env=env)
    assert r.code == 1 and "--ssh-config" in r.stderr and "Traceback" not in r.stderr  # got past the hosts


@pytest.mark.parametrize(
    "spellings, key",
    [
        (["node07", "NODE07", "node07:2222", "Node07:22", "user@node07", "alice@NODE07:2222"], "node07"),
        # one IPv6 address, bare or bracketed, with or without a port, in any case or zero run
        (
            ["2001:DB8::1", "2001:db8:0:0::1", "2001:0db8:0000::0001", "[2001:db8::1]", "[2001:db8::1]:22"],
            "2001:db8::1",
        ),
        (["10.0.0.1", "10.0.0.1:2222", "root@10.0.0.1", "::ffff:10.0.0.1", "[::FFFF:10.0.0.1]:22"], "10.0.0.1"),
        # leading zeros are no IPv4 address to Python since 3.9.5 (other parsers read them as octal):
        # such a host stays a name, compared as written
        (["127.000.000.001"], "127.000.000.001"),
    ],
)
def test_host_key_is_one_for_every_spelling_of_a_host(spellings, key) -> None:
    from trainctl.inventory import host_key

    assert [host_key(s) for s in spellings] == [key] * len(spellings)


def test_host_key_keeps_other_hosts_apart() -> None:
    from trainctl.inventory import host_key

    # a bare IPv6 address has several colons, so its last group is no port: a port needs brackets
    assert host_key("2001:db8::1:22") == "2001:db8::1:22" != host_key("[2001:db8::1]:22")
    assert len({host_key(h) for h in ["node07", "node070", "node07.a", "2001:db8::2", "127.0.0.1"]}) == 5


def test_host_address_splits_user_host_and_port() -> None:
    from trainctl.inventory import HostAddress

    assert HostAddress.split("alice@node07:2222") == HostAddress("node07", "2222", "alice")
    assert HostAddress.split("[2001:DB8::1]:22") == HostAddress("2001:DB8::1", "22", None, bracketed=True)
    assert HostAddress.split("2001:db8::1") == HostAddress("2001:db8::1")
    assert HostAddress.split("a@b@node07") == HostAddress("node07", None, "a@b")  # the last @, as OpenSSH
    assert HostAddress.split("[::1]x") == HostAddress("[::1]x")  # no form: one host named as written


def test_ipv6_with_a_port_is_written_in_brackets_in_lists_and_hostfiles(tmp_path) -> None:
    expected = ["node01", "[2001:db8::1]:2222", "node02", "node03", "2001:db8::2", "10.0.0.1:22"]
    assert [h.name for h in parse_hosts("node01,[2001:db8::1]:2222,node[02-03],2001:db8::2,10.0.0.1:22")] == expected
    f = tmp_path / "hosts"
    f.write_text("[2001:db8::1]:2222 slots=8\n[fe80::1]\n")
    assert parse_hosts(f"@{f}") == [HostSpec("[2001:db8::1]:2222", 8), HostSpec("[fe80::1]")]


@pytest.mark.parametrize(
    "spec, msg",
    [
        # one host in two spellings would get two agents
        (
            "node07,node01,NODE07:2222",
            "host 'NODE07:2222' is listed twice in 'node07,node01,NODE07:2222' (also as 'node07': a port or the "
            "case does not make another host); list each host once",
        ),
        (
            "[2001:db8::1]:22,2001:DB8:0::1",
            "host '2001:DB8:0::1' is listed twice in '[2001:db8::1]:22,2001:DB8:0::1' (also as '[2001:db8::1]:22': "
            "a port or the case does not make another host); list each host once",
        ),
        (
            "alice@node07",
            "--hosts: 'alice@node07' names a login user; write the host alone (node07) and set `User alice` for "
            "it in the ssh config (--ssh-config)",
        ),
        (
            "node07:2222:1",
            "--hosts: 'node07:2222:1' is neither host:port nor an IPv6 address; an IPv6 address with a port is "
            "written in brackets ([2001:db8::1]:2222)",
        ),
        ("[2001:db8::1]:0", "--hosts: '[2001:db8::1]:0' has port '0'; a port is a number in 1..65535 (node01:2222)"),
        ("node07:\u00b2", "--hosts: 'node07:\u00b2' has port '\u00b2'; a port is a number in 1..65535 (node01:2222)"),
    ],
)
def test_host_specs_that_are_refused_say_why(spec, msg) -> None:
    with pytest.raises(InventoryError) as ei:
        parse_hosts(spec)
    assert str(ei.value) == msg
