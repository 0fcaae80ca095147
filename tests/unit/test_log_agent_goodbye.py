"""torchrun's goodbye on a run of several agents: the first agent (the c10d store's host) exits when the run ends,
and the others' last store call fails before they log that they could not shut the rendezvous down
(torch/distributed/elastic/rendezvous/dynamic_rendezvous.py DynamicRendezvousHandler.shutdown). The fixture is the
second agent's log of a healthy `trainctl demo` run (torch 2.13.0, 2 agents x 2 ranks), where it gave a
"rendezvous failed" warning above the demo's straggler."""

from __future__ import annotations

from pathlib import Path

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind

GOODBYE = Path(__file__).parents[1] / "fixtures" / "logs" / "agent" / "goodbye_after_healthy_run.log"


def findings(text: str):
    return analyze_log_events(parse_log_text(text, source="agent.log"))


def test_the_store_failure_of_the_goodbye_is_no_finding_and_nothing_of_it_is_quoted() -> None:
    text = GOODBYE.read_text()
    assert "[c10d] recvVector failed on SocketImpl" in text and "has failed to shutdown the rendezvous" in text
    assert findings(text) == []


def test_the_same_store_failure_without_the_goodbye_is_still_a_lost_store() -> None:
    lines = GOODBYE.read_text().splitlines()
    mid_run = "\n".join(line for line in lines if "has failed to shutdown the rendezvous" not in line)
    (f,) = findings(mid_run)
    assert f.kind is FindingKind.RENDEZVOUS_ERROR and "recvVector failed" in f.summary
