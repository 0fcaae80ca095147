"""Findings of a log given as text, as the log analyzer makes them: the helper the log tests share."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Finding


def findings(text: str, source: str = "t.log") -> list[Finding]:
    return analyze_log_events(parse_log_text(text, source=source))
