"""NVIDIA's resiliency extension's own lines (nvidia-resiliency-ext d8686d9): the rank monitor's timeouts name who
noticed, never a culprit; a node health check names the node that checked itself."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind


def _findings(text: str):
    return analyze_log_events(parse_log_text(text, "nvrx.log"))


def test_every_ranks_monitor_timing_out_blames_nobody_and_says_what_timed_out() -> None:
    text = "".join(
        f"[2025-06-01 10:30:00,00{r}] [WARNING] [RankMonServer{4240 + r}@gpu-node-7:{r}] [Cycle 1] Section 'step' has"
        " been open for 1801.25 seconds. Timeout is 1800.00 seconds.\n"
        for r in range(4)
    )
    (f,) = _findings(text)
    assert (f.kind, f.ranks, f.hosts) == (FindingKind.HUNG_COLLECTIVE, (), ())
    assert "'step' section stayed open 1801.25 s" in f.summary and "who noticed" in f.summary


def test_a_failed_node_health_check_names_the_node_and_a_nic_check_is_its_network_ports() -> None:
    (gpu,) = _findings(
        "[ERROR] GPU health check failed for node gpu-node-7.cluster.local_31337_0: Node "
        "gpu-node-7.cluster.local_31337_0 has an unhealthy GPU.\n"
    )
    assert (gpu.kind, gpu.hosts) == (FindingKind.FAULTY_HOST, ("gpu-node-7.cluster.local",))
    (nic,) = _findings("NIC link state health check failed for node node042_123_0: Node node042_123_0 has unhealthy "
                       "NIC link(s).\n")  # fmt: skip
    assert (nic.category, nic.hosts) == (Category.IB, ("node042",))
