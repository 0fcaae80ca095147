"""NCCL's socket transport on a message longer than the receive posted (src/transport/net_socket.cc): from 2.12.10-1 it
returns ncclInvalidUsage and says in the line that the ranks' collective sizes or settings may not match; before,
the line named no cause (ncclInternalError) and stays a socket error."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind


def first(text: str):
    return analyze_log_events(parse_log_text(text, source="t.log"))[0]


def test_truncated_message_with_nccls_mismatch_hint_is_a_collective_mismatch() -> None:
    f = first(
        "node-a:5838:6020 [0] transport/net_socket.cc:561 NCCL WARN NET/Socket : peer 10.1.2.6<41138> message "
        "truncated : receiving 8 bytes instead of 4. If you believe your socket network is in a healthy state, there "
        "may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks\n"
        "node-a:5838:6020 [0] NCCL INFO transport/net.cc:1393 -> 5\n"
    )
    assert (f.kind, f.category) == (FindingKind.COLLECTIVE_MISMATCH, Category.TYPE_MISMATCH)
    assert f.hosts == () and f.ranks == ()  # the peer sent what it was asked to: no one is blamed


def test_truncated_message_before_2_12_10_stays_a_socket_error() -> None:
    f = first(
        "node-a:5838:6020 [0] transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.1.2.6<59210> message "
        "truncated : receiving 1048576 bytes instead of 65536\n"
    )
    assert (f.kind, f.category) == (FindingKind.NETWORK_ERROR, Category.SOCKET)
