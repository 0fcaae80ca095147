"""Hosts that disagree on NCCL's network (collectors/log_net_mismatch.py): two hosts whose processes
chose disjoint networks are one network_error finding naming nobody, first, ahead of the stalled
set-up it explains; one network everywhere, or one host alone, is nothing. Lines in NCCL's formats
(src/debug.cc prefix "host:pid:tid [dev] NCCL INFO ", src/init.cc "Using network %s",
src/transport/net_ib "NET/IB : No device found.", src/misc/param.cc "%s set by environment to %lld.")."""

from __future__ import annotations

from log_text import findings

from trainctl.findings import Category, FindingKind, Severity


def init(host: str, pid: int, network: str, *, why: tuple[str, ...] = ()) -> str:
    lines = [f"{host}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{pid % 200}<0>"]
    lines += [f"{host}:{pid}:{pid} [0] NCCL INFO {w}" for w in why]
    lines.append(f"{host}:{pid}:{pid} [0] NCCL INFO Using network {network}")
    return "\n".join(lines)


NO_IB = ("NET/IB : No device found.", "NCCL_IB_DISABLE set by environment to 1.")
SETUP = "nodeA:100:150 [0] NCCL INFO Channel 00/02 :    0   1\nnodeB:200:250 [0] NCCL INFO Trees [0] -1/-1/-1->1->0"


def test_hosts_on_disjoint_networks_are_one_network_error_first_naming_nobody():
    text = "\n".join([init("nodeA", 100, "IB"), init("nodeB", 200, "Socket", why=NO_IB), SETUP])
    fs = findings(text)
    f = fs[0]
    assert (f.kind, f.category, f.severity) == (FindingKind.NETWORK_ERROR, Category.NCCL, Severity.WARNING)
    assert f.ranks == () and f.hosts == ()  # the lines do not say which host is misconfigured
    assert "nodeA uses IB; nodeB uses Socket" in f.summary
    assert f.evidence["reporting_hosts"] == ["nodeA", "nodeB"]
    assert f.evidence["signatures"] == ["nccl_network_mismatch"]
    quoted = f.evidence["lines"]
    assert quoted[0].endswith("NCCL INFO Using network IB") and quoted[-1].endswith("NCCL INFO Using network Socket")
    assert any(q.endswith("NET/IB : No device found.") for q in quoted)
    assert any(q.endswith("NCCL_IB_DISABLE set by environment to 1.") for q in quoted)
    # the stalled set-up is what the mismatch explains: no second, absence-read hang finding
    assert not any(g.evidence.get("read_from_absence") for g in fs)


def test_a_plugin_name_with_spaces_is_one_network():
    text = "\n".join([init("n1", 1, "AWS Libfabric"), init("n2", 2, "AWS Libfabric"), init("n3", 3, "Socket")])
    f = findings(text)[0]
    assert f.kind is FindingKind.NETWORK_ERROR
    assert "n1 uses AWS Libfabric; n2 uses AWS Libfabric; n3 uses Socket" in f.summary


def test_one_network_on_every_host_or_one_host_alone_gives_no_mismatch():
    same = "\n".join([init("nodeA", 100, "IB"), init("nodeB", 200, "IB"), SETUP])
    fs = findings(same)
    assert [f.evidence["signatures"] for f in fs] == [["nccl_init_incomplete"]]  # the stalled set-up, as before
    alone = "\n".join([init("nodeA", 100, "IB"), init("nodeA", 101, "Socket", why=NO_IB)])
    assert [f.evidence["signatures"] for f in findings(alone)] == [["nccl_init_incomplete"]]
    unprefixed = "NCCL INFO Using network IB\nNCCL INFO Using network Socket"  # no host to tell apart
    assert findings(unprefixed) == []


def test_hosts_that_share_a_network_are_not_a_mismatch():
    """A retry with NCCL_IB_DISABLE set (both hosts show IB, then Socket) is two runs that each agreed."""
    text = "\n".join(
        [init("nodeA", 1, "IB"), init("nodeB", 2, "IB"), init("nodeA", 3, "Socket"), init("nodeB", 4, "Socket")]
    )
    assert not any(f.kind is FindingKind.NETWORK_ERROR for f in findings(text))


def test_a_transport_error_after_the_mismatch_quotes_the_mismatch_lines_as_its_evidence():
    connect = "nodeB:200:250 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.5<43211> failed : Connection refused"
    text = "\n".join([init("nodeA", 100, "IB"), init("nodeB", 200, "Socket", why=NO_IB), connect])
    f = findings(text)[0]
    assert (f.kind, f.category, f.hosts) == (FindingKind.NETWORK_ERROR, Category.SOCKET, ())
    assert "nccl_network_mismatch" in f.evidence["signatures"]
    assert any(q.endswith("Using network Socket") for q in f.evidence["lines"])


def test_a_host_that_completed_init_before_the_other_chose_its_network_is_another_run():
    """Init COMPLETE waits for every rank's bootstrap, which comes after its network line: a host done
    before the other host chose is a different job in the same paste (a healthy run's preamble)."""
    done = "nodeA:100:100 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xab - Init COMPLETE"
    earlier_run = "\n".join([init("nodeA", 100, "Socket"), done, init("nodeB", 200, "IB"), init("nodeC", 300, "IB")])
    assert not any(f.kind is FindingKind.NETWORK_ERROR for f in findings(earlier_run))
    # completed after both chose (2.22+ connects at the first collective): still one job, a mismatch
    same_job = "\n".join([init("nodeA", 100, "Socket"), init("nodeB", 200, "IB"), done])
    assert findings(same_job)[0].kind is FindingKind.NETWORK_ERROR


def test_a_job_across_hosts_whose_nccl_chose_the_loopback_is_a_network_error_naming_nobody():
    """src/misc/socket.cc picks lo or docker* only when no other interface exists or NCCL_SOCKET_IFNAME names it;
    across hosts those addresses are each host's own. One host alone on lo (a single-node run) is nothing."""
    lo = [
        "nodeA:100:100 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        "nodeB:200:200 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        "nodeA:100:150 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
        "nodeA:100:150 [0] NCCL INFO Using network Socket",
    ]
    f = findings("\n".join(lo))[0]
    assert (f.kind, f.category, f.severity) == (FindingKind.NETWORK_ERROR, Category.NCCL, Severity.WARNING)
    assert f.ranks == () and f.hosts == ()
    assert "lo:127.0.0.1<0>" in f.summary and "across 2 hosts" in f.summary
    assert f.evidence["signatures"] == ["nccl_local_interface"]
    # one host, or hosts on a shared interface, give no such finding
    assert not any("host-local" in g.summary for g in findings("\n".join(x for x in lo if "nodeB" not in x)))
    shared = "\n".join(x.replace("lo:127.0.0.1", "eth0:10.0.0.1") for x in lo)
    assert not any("host-local" in g.summary for g in findings(shared))
    # a host whose init completed before the loopback host printed its first line is another run in the paste
    other_run = "nodeC:300:300 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE"
    alone = "\n".join(x for x in lo if "nodeB" not in x)
    assert not any("host-local" in g.summary for g in findings(other_run + "\n" + alone))
    assert any("host-local" in g.summary for g in findings(alone + "\n" + other_run))
    # the init's nNodes says the job spans hosts where one host's lines are all the paste has (a docker bridge)
    one = "\n".join(
        [
            "nodeA:100:100 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>",
            "nodeA:100:150 [0] NCCL INFO comm 0x55 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
        ]
    )
    assert "docker0:172.17.0.1<0>" in findings(one)[0].summary
    assert not any("host-local" in g.summary for g in findings(one.replace("nNodes 2", "nNodes 1")))
