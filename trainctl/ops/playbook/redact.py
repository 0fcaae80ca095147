"""Secrets out of every record: webhook URLs, tokens and passwords never reach a log, audit or dry run.

A notification URL is a credential (a Slack webhook's path is its token; an apprise URL such as
`pagerduty://ROUTING_KEY@API_KEY` or `mailto://user:password@host` carries the keys in the URL),
and a playbook input may be declared `secret: true`. The playbook executor registers each of them
with a Redactor before the first record is written, and passes every record, decision, error
message and log line through it. Two rules:

- a registered value is replaced wherever it appears: a URL by its redacted form, any other value
  by `***`; a URL's secret parts (user and password, path after the first segment, query,
  fragment; for a non-web scheme everything after `scheme://`) are registered too, so a service's
  own log line that prints only the key is caught as well;
- any URL with a password or a credential-like query parameter (token, key, secret, password,
  signature, ...) is redacted wherever it appears, registered or not.

A redacted URL keeps its scheme, host, port and first path segment, so a person can still tell
which endpoint failed: `https://hooks.slack.com/services/***`, `https://***@example.com/hook`,
`mailtos://***@smtp.example.com`; where the host part is itself a key (`slack://TOKEN/...`,
`pagerduty://KEY@APIKEY`: not an IP and no dot) only the scheme is kept: `slack://***`.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import SplitResult, urlsplit

__all__ = ["MASK", "Redactor", "redact_url"]

MASK = "***"
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`\]\)]+")
_CRED_PARAM = re.compile(r"(token|key|secret|pass|pwd|sig|auth|credential|apikey|api_key)", re.I)
_MIN_PART = 6  # shorter URL parts ("v1", "hook") are not secrets on their own, and would mask ordinary words


def _named_host(u: SplitResult) -> bool:
    """Is the URL's host part a real host (an IP or a dotted name)? In `slack://TokenA/...` or
    `pagerduty://KEY@APIKEY` it is a credential instead."""
    host = u.hostname or ""
    if not host:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return "." in host


def redact_url(url: str) -> str:
    """The URL with its secret parts masked (see the module docstring)."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return f"{url.split('://', 1)[0]}://{MASK}" if "://" in url else MASK
    if u.scheme.lower() not in ("http", "https") and not _named_host(u):
        return f"{u.scheme}://{MASK}"
    if not u.hostname:
        return f"{u.scheme}://{MASK}"
    host = u.hostname + (f":{port}" if port else "")
    cred = f"{MASK}@" if (u.username or u.password) else ""
    segs = [s for s in u.path.split("/") if s]
    path = ("/" + segs[0] if segs else "") + (f"/{MASK}" if len(segs) > 1 else "")
    if not segs and u.path.endswith("/"):
        path = "/"
    query = f"?{MASK}" if u.query else ""
    frag = f"#{MASK}" if u.fragment else ""
    return f"{u.scheme}://{cred}{host}{path}{query}{frag}"


def _url_parts(url: str) -> list[str]:
    """The pieces of a URL that are secret on their own (see redact_url)."""
    try:
        u = urlsplit(url)
    except ValueError:
        return []
    if u.scheme.lower() not in ("http", "https") and not _named_host(u):
        rest = url.split("://", 1)[1] if "://" in url else url
        return [rest, *re.split(r"[/@:?#&=]", rest)]
    segs = [s for s in u.path.split("/") if s]
    parts = [u.username or "", u.password or "", *segs[1:], u.query, u.fragment]
    parts += [v for kv in u.query.split("&") for v in kv.split("=", 1)[1:]]
    return parts


def _leaky(url: str) -> bool:
    """A URL that carries a credential whoever wrote it: a password, or a credential-like query key."""
    try:
        u = urlsplit(url)
    except ValueError:
        return True
    if u.password:
        return True
    return any(_CRED_PARAM.search(kv.split("=", 1)[0]) for kv in u.query.split("&") if "=" in kv)


class Redactor:
    """Masks registered secrets (and credential-bearing URLs) in text and in nested JSON-like values."""

    def __init__(self, secrets: Iterable[Any] = ()) -> None:
        self._values: dict[str, str] = {}  # secret -> what replaces it
        for s in secrets:
            self.add(s)

    def add(self, value: Any) -> None:
        """Register a secret: a string, or every string inside a list/dict."""
        if isinstance(value, dict):
            for v in value.values():
                self.add(v)
            return
        if isinstance(value, (list, tuple)):
            for v in value:
                self.add(v)
            return
        if not isinstance(value, str) or not value.strip():
            return
        if "://" in value:
            self._values[value] = redact_url(value)
            for part in _url_parts(value):
                if len(part) >= _MIN_PART:
                    self._values.setdefault(part, MASK)
        elif len(value) >= 4:
            self._values[value] = MASK

    def text(self, s: str) -> str:
        if not s:
            return s
        # longest first, so a URL is replaced whole before its parts are looked for
        for secret in sorted(self._values, key=len, reverse=True):
            if secret in s:
                s = s.replace(secret, self._values[secret])
        return _URL.sub(lambda m: redact_url(m.group(0)) if _leaky(m.group(0)) else m.group(0), s)

    def value(self, v: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (keys too)."""
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        return v

    @contextmanager
    def logging(self, *loggers: logging.Logger) -> Iterator[None]:
        """Redact every record reaching the handlers of `loggers` (and Python's last-resort handler)."""
        filt = _RedactFilter(self)
        handlers = {h for lg in loggers for h in lg.handlers}
        if logging.lastResort is not None:
            handlers.add(logging.lastResort)
        for h in handlers:
            h.addFilter(filt)
        try:
            yield
        finally:
            for h in handlers:
                h.removeFilter(filt)


class _RedactFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = self.redactor.text(msg)
        if clean != msg:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None:
            # a traceback's text is formatted later from the exception: keep only the cleaned message
            record.exc_text = self.redactor.text(logging.Formatter().formatException(record.exc_info))
        return True
