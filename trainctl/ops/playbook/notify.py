"""Notifications from playbooks: one message, shaped for the service that receives it.

Where a notify step's `url` goes:

    http(s)://...                 generic JSON webhook: trainctl POSTs
                                  {"runbook", "incident", "run", "message"[, "evidence"]} itself
                                  (so the HTTP status lands in the audit); basic auth from user:pass@
    https://hooks.slack.com/...,  Slack: title and a markdown body, evidence as bullets
    slack://...
    pagerduty://KEY@APIKEY/...    PagerDuty (Events v2): a short summary (PagerDuty caps it at 1024
                                  characters), severity from the findings, evidence in custom details
    mailto(s)://...               e-mail: subject line, plain-text body with the evidence
    any other apprise scheme      title and plain-text body (json://, discord://, msteams://, ...)

Every service but the plain webhook goes through apprise (the `notify` extra). The webhook payload
keeps the key `runbook` for the playbook's name: receivers already parse it.

A `command` notification runs a program with the message as data: the argv list exactly as the
playbook wrote it (never a shell line), the JSON payload on stdin and the message in
TRAINCTL_MESSAGE. It runs an arbitrary program on this machine, so the executor gates it like a
destructive step (--yes).

Shaping is pure (`shape`); sending is `send` and `run_command`. Errors name the URL redacted.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from trainctl.errors import PlaybookError
from trainctl.ops.playbook.redact import Redactor, redact_url

__all__ = ["Service", "Notification", "Shaped", "service_of", "shape", "send", "run_command", "NotifyError"]

logger = logging.getLogger(__name__)

PAGERDUTY_SUMMARY_MAX = 1024  # Events API v2: payload.summary is truncated at 1024 characters
SLACK_TEXT_MAX = 3000  # Slack: a section block's text is at most 3000 characters
SUBJECT_MAX = 150


class NotifyError(PlaybookError):
    """A notification could not be delivered (the message says where, with secrets masked)."""


class Service(str, Enum):
    WEBHOOK = "webhook"
    SLACK = "slack"
    PAGERDUTY = "pagerduty"
    EMAIL = "email"
    APPRISE = "apprise"  # any other scheme apprise understands


@dataclass(frozen=True)
class Notification:
    """What a playbook says: who (playbook, incident, run), what (message), how bad, and the evidence."""

    playbook: str
    incident: str
    run: str
    message: str
    severity: str = "info"  # info | warning | critical (the worst finding it is about)
    evidence: tuple[Mapping[str, Any], ...] = ()  # findings, as diagnose --json writes them

    def payload(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "runbook": self.playbook,
            "incident": self.incident,
            "run": self.run,
            "message": self.message,
        }
        if self.evidence:
            doc["evidence"] = [dict(e) for e in self.evidence]
        return doc


@dataclass(frozen=True)
class Shaped:
    title: str
    body: str
    body_format: str = "text"  # text | markdown (apprise NotifyFormat values)
    notify_type: str = "info"  # info | warning | failure (apprise NotifyType values)
    details: Mapping[str, str] = field(default_factory=dict)  # PagerDuty custom details
    json_payload: Mapping[str, Any] | None = None  # the plain webhook's body


def service_of(url: str) -> Service:
    u = urlsplit(url)
    scheme = u.scheme.lower()
    if scheme in ("http", "https"):
        return Service.SLACK if (u.hostname or "").lower() == "hooks.slack.com" else Service.WEBHOOK
    if scheme == "slack":
        return Service.SLACK
    if scheme == "pagerduty":
        return Service.PAGERDUTY
    if scheme in ("mailto", "mailtos"):
        return Service.EMAIL
    return Service.APPRISE


def _evidence_line(f: Mapping[str, Any]) -> str:
    hosts = ",".join(map(str, f.get("hosts") or [])) or "-"
    ranks = ",".join(map(str, f.get("ranks") or []))
    return (
        f"{f.get('kind')} on {hosts}"
        + (f" (ranks {ranks})" if ranks else "")
        + f", confidence {f.get('confidence')}: {f.get('summary', '')}"
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NOTIFY_TYPE = {"critical": "failure", "warning": "warning"}


def shape(service: Service, note: Notification) -> Shaped:
    """The message as this service wants it (pure)."""
    ntype = _NOTIFY_TYPE.get(note.severity, "info")
    title = f"trainctl {note.playbook}: {note.run}"
    lines = [_evidence_line(f) for f in note.evidence]
    if service is Service.WEBHOOK:
        return Shaped(title, note.message, "text", ntype, json_payload=note.payload())
    if service is Service.SLACK:
        body = note.message + f"\n*incident* `{note.incident}`" + "".join(f"\n• {ln}" for ln in lines)
        return Shaped(title, _clip(body, SLACK_TEXT_MAX), "markdown", ntype)
    if service is Service.PAGERDUTY:
        details = {"playbook": note.playbook, "incident": note.incident, "run": note.run}
        details.update({f"evidence_{i + 1}": ln for i, ln in enumerate(lines)})
        summary = _clip(" ".join(f"{note.playbook}: {note.message}".split()), PAGERDUTY_SUMMARY_MAX)
        return Shaped("", summary, "text", ntype, details=details)
    if service is Service.EMAIL:
        subject = _clip(f"[trainctl] {note.playbook}: " + (note.message.splitlines() or [""])[0], SUBJECT_MAX)
        body = "\n".join(
            [note.message, "", f"playbook: {note.playbook}", f"incident: {note.incident}", f"run: {note.run}"]
            + (["", "evidence:"] + [f"- {ln}" for ln in lines] if lines else [])
        )
        return Shaped(subject, body, "text", ntype)
    body = note.message + "".join(f"\n- {ln}" for ln in lines)
    return Shaped(title, body, "text", ntype)


@dataclass(frozen=True)
class Sent:
    service: Service
    target: str  # the URL, redacted
    http_status: int | None = None


def send(url: str, note: Notification, *, timeout_s: float, redactor: Redactor) -> Sent:
    """Deliver `note` to `url`; NotifyError (URL masked) when it cannot."""
    redactor.add(url)
    shown = redact_url(url)
    service = service_of(url)
    shaped = shape(service, note)
    # the URL as given: the run's log filter (Redactor.logging) masks it on the way out
    logger.info("notify service=%s url=%s", service.value, url)
    if service is Service.WEBHOOK:
        return Sent(service, shown, _post_json(url, shaped.json_payload or {}, timeout_s, redactor))
    return _send_apprise(url, service, shaped, timeout_s, redactor)


def _post_json(url: str, payload: Mapping[str, Any], timeout_s: float, redactor: Redactor) -> int:
    shown = redact_url(url)
    u = urlsplit(url)
    headers = {"Content-Type": "application/json"}
    if u.username or u.password:
        # urllib does not take user:pass@ from the URL; send it as HTTP basic auth instead
        cred = f"{u.username or ''}:{u.password or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(cred).decode()
        netloc = u.hostname + (f":{u.port}" if u.port else "") if u.hostname else ""
        url = urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return int(resp.status)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NotifyError(f"POST {shown} failed: {redactor.text(str(exc))}; check the webhook URL") from None


def _send_apprise(url: str, service: Service, shaped: Shaped, timeout_s: float, redactor: Redactor) -> Sent:
    shown = redact_url(url)
    try:
        import apprise
    except ImportError:
        raise NotifyError(
            f"notify url {shown} needs apprise; pip install 'trainctl[notify]' (a plain https:// webhook needs nothing)"
        ) from None
    # apprise logs its own failures (sometimes with the keys): keep them, cleaned, for our message
    with apprise.LogCapture(level=logging.INFO) as captured:
        obj = apprise.Apprise.instantiate(url)
        if obj is None:
            raise NotifyError(
                f"notify url {shown} is not a URL apprise understands; see https://github.com/caronc/apprise/wiki"
            )
        for attr in ("socket_connect_timeout", "socket_read_timeout"):
            if hasattr(obj, attr):
                setattr(obj, attr, float(timeout_s))
        if service is Service.PAGERDUTY and isinstance(getattr(obj, "details", None), dict):
            obj.details.update(shaped.details)
        ok = obj.notify(
            body=shaped.body,
            title=shaped.title,
            notify_type=apprise.NotifyType(shaped.notify_type),
            body_format=apprise.NotifyFormat(shaped.body_format),
        )
    if not ok:
        why = [ln for ln in captured.getvalue().splitlines() if ln.strip()]
        detail = redactor.text(why[-1].split(" - ", 2)[-1]) if why else "no reason given"
        raise NotifyError(f"{service.value} notification to {shown} failed: {detail}; check the URL and the service")
    return Sent(service, shown)


def run_command(argv: Sequence[str], note: Notification, *, timeout_s: float, redactor: Redactor) -> int:
    """Run the notify command: argv as given (no shell), payload on stdin, message in TRAINCTL_MESSAGE."""
    env = {
        **os.environ,
        "TRAINCTL_MESSAGE": note.message,
        "TRAINCTL_INCIDENT": note.incident,
        "TRAINCTL_PLAYBOOK": note.playbook,
    }
    shown = redactor.text(" ".join(argv[:1]))
    try:
        proc = subprocess.run(
            list(argv), input=json.dumps(note.payload()), text=True, capture_output=True, timeout=timeout_s, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotifyError(f"notify command {shown} failed: {redactor.text(str(exc))}") from None
    if proc.returncode != 0:
        raise NotifyError(
            f"notify command {shown} exited {proc.returncode}: {redactor.text(proc.stderr.strip()[-200:])}"
        )
    return proc.returncode
