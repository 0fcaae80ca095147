"""The channel buffer that keeps packets' bytes as they came reads exactly what paramiko's would."""

from __future__ import annotations

import paramiko
from hypothesis import given
from hypothesis import strategies as st

from trainctl.collectors.ssh import _PiecesPipe

# ("feed", bytes) or ("read", n): a transport thread feeding packets, a reader taking up to n bytes
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("feed"), st.binary(min_size=1, max_size=40)),
        st.tuples(st.just("read"), st.integers(min_value=1, max_value=100)),
    ),
    max_size=40,
)


@given(_STEPS)
def test_every_read_returns_what_paramikos_buffer_returns(steps) -> None:
    theirs, ours = paramiko.buffered_pipe.BufferedPipe(), _PiecesPipe()
    for op, arg in steps:
        if op == "feed":
            theirs.feed(arg)
            ours.feed(arg)
        elif len(theirs):  # an empty read would wait for the next feed
            assert ours.read(arg) == theirs.read(arg)
        assert (len(ours), ours.read_ready()) == (len(theirs), theirs.read_ready())
    assert ours.empty() == theirs.empty()


def test_a_read_of_one_whole_packet_is_that_packets_bytes_not_a_copy() -> None:
    pipe = _PiecesPipe()
    packet = bytes(range(256)) * 128
    pipe.feed(packet)
    assert pipe.read(1 << 20) is packet
    pipe.close()
    assert pipe.read(10) == b""
