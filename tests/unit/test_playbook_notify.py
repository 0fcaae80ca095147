"""Notification payloads shaped per service, and secrets masked in text, values and log lines."""

from __future__ import annotations

import io
import logging

import pytest

from trainctl.ops.playbook.notify import Notification, Service, service_of, shape
from trainctl.ops.playbook.redact import Redactor, redact_url

EVIDENCE = (
    {
        "kind": "hung_collective",
        "hosts": ["node03"],
        "ranks": [5],
        "confidence": 0.6,
        "summary": "rank 5 never entered allreduce",
    },
)
NOTE = Notification("hung-collective", "inc-7", "/runs/r1", "not acting on 1 finding", "critical", EVIDENCE)


@pytest.mark.parametrize(
    ("url", "service"),
    [
        ("https://hooks.example.com/hook", Service.WEBHOOK),
        ("http://127.0.0.1:8080/x", Service.WEBHOOK),
        ("https://hooks.slack.com/services/T0/B0/XYZ", Service.SLACK),
        ("slack://TokenA/TokenB/TokenC/#ops", Service.SLACK),
        ("pagerduty://routingkey@apikey/trainctl", Service.PAGERDUTY),
        ("mailtos://user:pw@smtp.example.com?to=sre@example.com", Service.EMAIL),
        ("json://127.0.0.1:9000/in", Service.APPRISE),
    ],
)
def test_service_from_the_url(url: str, service: Service) -> None:
    assert service_of(url) is service


def test_payloads_are_shaped_per_service() -> None:
    hook = shape(Service.WEBHOOK, NOTE)
    assert hook.json_payload == {
        "runbook": "hung-collective",
        "incident": "inc-7",
        "run": "/runs/r1",
        "message": "not acting on 1 finding",
        "evidence": list(EVIDENCE),
    }
    slack = shape(Service.SLACK, NOTE)
    assert (slack.title, slack.body_format, slack.notify_type) == (
        "trainctl hung-collective: /runs/r1",
        "markdown",
        "failure",
    )
    assert slack.body == (
        "not acting on 1 finding\n*incident* `inc-7`\n"
        "• hung_collective on node03 (ranks 5), confidence 0.6: rank 5 never entered allreduce"
    )
    pd = shape(Service.PAGERDUTY, NOTE)
    assert pd.body == "hung-collective: not acting on 1 finding" and pd.notify_type == "failure"
    assert dict(pd.details) == {
        "playbook": "hung-collective",
        "incident": "inc-7",
        "run": "/runs/r1",
        "evidence_1": "hung_collective on node03 (ranks 5), confidence 0.6: rank 5 never entered allreduce",
    }
    long = shape(Service.PAGERDUTY, Notification("p", "i", "r", "x" * 5000))
    assert len(long.body) == 1024  # PagerDuty's summary limit
    mail = shape(Service.EMAIL, NOTE)
    assert mail.title == "[trainctl] hung-collective: not acting on 1 finding"
    assert mail.body.splitlines() == [
        "not acting on 1 finding",
        "",
        "playbook: hung-collective",
        "incident: inc-7",
        "run: /runs/r1",
        "",
        "evidence:",
        "- hung_collective on node03 (ranks 5), confidence 0.6: rank 5 never entered allreduce",
    ]
    assert shape(Service.WEBHOOK, Notification("p", "i", "r", "m")).json_payload == {
        "runbook": "p",
        "incident": "i",
        "run": "r",
        "message": "m",
    }


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook"),
        ("https://hooks.slack.com/services/T0/B0/s3cretT0ken", "https://hooks.slack.com/services/***"),
        ("https://bob:hunter2@example.com/in?token=abc", "https://***@example.com/in?***"),
        ("pagerduty://routingkey123@apikey456/trainctl", "pagerduty://***"),
        ("mailtos://user:pw@smtp.example.com", "mailtos://***@smtp.example.com"),
        ("json://u:p@127.0.0.1:9000/in/t0ken", "json://***@127.0.0.1:9000/in/***"),
        ("slack://TokenA/TokenB/TokenC/#ops", "slack://***"),
    ],
)
def test_urls_keep_only_what_names_the_endpoint(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_registered_secrets_and_their_parts_are_masked_everywhere() -> None:
    red = Redactor(["https://hooks.slack.com/services/T0/B0/s3cretT0ken", "pagerduty://routingkey123@apikey456/x"])
    red.add("plain-token-value")
    text = (
        "POST https://hooks.slack.com/services/T0/B0/s3cretT0ken failed; "
        "An invalid Pager Duty API Key (apikey456) was specified; auth plain-token-value"
    )
    assert red.text(text) == (
        "POST https://hooks.slack.com/services/*** failed; An invalid Pager Duty API Key (***) was specified; auth ***"
    )
    assert red.value({"a": ["s3cretT0ken", {"k": "routingkey123"}], "n": 3}) == {"a": ["***", {"k": "***"}], "n": 3}
    # a URL carrying a credential is masked even unregistered; a plain one is evidence and stays
    assert Redactor().text("see https://u:pw@h.example/x and https://docs.nvidia.com/nccl/env.html") == (
        "see https://***@h.example/x and https://docs.nvidia.com/nccl/env.html"
    )
    assert Redactor().text("GET https://api.example/v1?access_token=zz") == "GET https://api.example/v1?***"


def test_log_lines_are_masked_on_the_way_out() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("trainctl.test_redact")
    log.addHandler(handler)
    log.propagate = False
    try:
        red = Redactor(["https://hooks.slack.com/services/T0/B0/s3cretT0ken"])
        with red.logging(log):
            log.warning("posting to %s", "https://hooks.slack.com/services/T0/B0/s3cretT0ken")
        log.warning("after: %s", "s3cretT0ken")  # the filter is gone after the block
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().splitlines() == ["posting to https://hooks.slack.com/services/***", "after: s3cretT0ken"]
