"""The root cause first: a run that crashed or hung is one incident, not six critical findings.

When one rank fails, its peers fail after it: gloo/NCCL report "connection closed by peer", the
other agents exit, torchrun tears the group down with SIGTERM, the survivors of a hang time out.
Each of those is a true line in some log, and each used to become its own critical finding naming
its own rank and host, so an SRE (or a playbook) saw five culprits for one fault. Here, after every
other analyzer (and after consolidate), one pure pass:

1. turns what the runtime recorded (run_events: torchelastic error files, first non-finite loss)
   into findings, with torchelastic's own root-cause rule: the smallest error-file timestamp is the
   first failure (torch/distributed/elastic/multiprocessing/errors/__init__.py,
   ChildFailedError.get_first_failure); the first failure's finding has the kind and category the
   log signatures gave its exception (run_events.kind/category, filled by the reader): an
   out-of-memory is an OOM finding, an NCCL error a network error, an ECC error a faulty host, a
   CUDA error a cuda_error crash, and an exception no signature knows a crash (exception);
2. picks the incident's root: a critical hardware finding (faulty_host: Xid, ECC, lost GPU...)
   first, since it explains the crash of the ranks on that host; else the first failing rank; else a
   hung collective; else the first non-finite loss;
3. folds the consequences into the root's evidence (`followed_by`, each with its kind, ranks, hosts
   and summary, nothing dropped): crashes, network and rendezvous errors, and (under a crash or a
   hardware root) hung collectives; a straggler on the root's ranks is folded too, and any other
   straggler is capped at warning (a crash or a hang outranks a straggler).

Independent problems are never folded: a non-finite loss, an OOM (other than the root's own,
printed again in the logs), a collective mismatch, a faulty host that is only a warning, and
findings about other hosts' hardware stay as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from trainctl.analyzers import launcher_hang
from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["findings_from_run_events", "rank_root_cause", "analyze_root_cause", "CONSEQUENCE_KINDS"]

# Kinds a failing rank drags its peers into (folded under a root).
CONSEQUENCE_KINDS = frozenset({FindingKind.CRASH, FindingKind.NETWORK_ERROR, FindingKind.RENDEZVOUS_ERROR})
_MAX_FOLLOWED = 50  # evidence keeps this many folded findings (the count is always complete)
# Kinds the first failure's finding takes from its exception's classification: what a rank that
# raised one died of, named on that rank. Other kinds of a line (a hang names the ranks that never
# arrived, a non-finite loss the rank of numerics/rank-R.json's first one) would name another rank
# than the one that raised, so such an exception stays a crash (exception).
_OWN_FAILURE = frozenset(
    {
        FindingKind.OOM,
        FindingKind.CRASH,
        FindingKind.NETWORK_ERROR,
        FindingKind.RENDEZVOUS_ERROR,
        FindingKind.FAULTY_HOST,
    }
)
_VERB = {FindingKind.OOM: "ran out of memory", FindingKind.FAULTY_HOST: "failed on its hardware"}


def _classified(row: Mapping[str, Any]) -> tuple[FindingKind, Category | None]:
    """The row's kind/category (run_events, from the log signatures) as the finding's. Null (no
    signature knew the message, or a file from before the columns), a value this trainctl does not
    know, or a kind that names another rank: a crash (exception), as before the classification."""
    try:
        kind = FindingKind(row.get("kind"))
        category = Category(row["category"]) if row.get("category") else None
    except ValueError:
        return FindingKind.CRASH, Category.EXCEPTION
    if kind not in _OWN_FAILURE:
        return FindingKind.CRASH, Category.EXCEPTION
    return kind, Category.EXCEPTION if kind is FindingKind.CRASH and category is None else category


def _host(rank: int, row_host: Any, rank_to_host: Mapping[int, str]) -> str | None:
    return rank_to_host.get(rank) or (str(row_host) if row_host else None)


def _where(rank: int, host: str | None) -> str:
    return f"rank {rank} on {host}" if host else f"rank {rank}"


def findings_from_run_events(
    rows: Sequence[Mapping[str, Any]], rank_to_host: Mapping[int, str] | None = None, *, max_later: int = 20
) -> list[Finding]:
    """run_events rows -> at most one crash finding (the first failing rank) and one numerical
    finding (the first non-finite loss). Rows: rank, host, event, step, message, detail, source,
    ts (datetime or ns int, None when the file had no time)."""
    r2h = dict(rank_to_host or {})
    out: list[Finding] = []

    def ts_ns(r: Mapping[str, Any]) -> int | None:
        t = r.get("ts")
        if t is None or isinstance(t, int):
            return t
        try:
            return int(t.timestamp() * 1e9)
        except (AttributeError, ValueError, OverflowError, OSError):
            return None  # pandas' NaT (a file's int64-min timestamp) and other times with no instant

    exc = [r for r in rows if r.get("event") == "exception"]
    if exc:
        # torchelastic: the smallest timestamp; a file without one sorts last (it cannot be shown first)
        exc.sort(key=lambda r: (ts_ns(r) is None, ts_ns(r) or 0, int(r["rank"])))
        first = exc[0]
        rank, host = int(first["rank"]), _host(int(first["rank"]), first.get("host"), r2h)
        t0 = ts_ns(first)
        message = str(first.get("message") or "").strip() or "an exception (no message)"
        later = [
            {
                "rank": int(r["rank"]),
                "host": _host(int(r["rank"]), r.get("host"), r2h),
                "after_s": round((ts_ns(r) - t0) / 1e9, 3) if t0 is not None and ts_ns(r) is not None else None,
                "exception": str(r.get("message") or "")[:300],
            }
            for r in exc[1:]
        ]
        kind, category = _classified(first)
        first_line = message.splitlines()[0][:200]
        tail = f"; {len(later)} other rank(s) failed after it" if later else ""
        out.append(
            Finding(
                kind=kind,
                severity=Severity.CRITICAL,
                category=category,
                summary=f"{_where(rank, host)} {_VERB.get(kind, 'failed')} first: {first_line}{tail}",
                ranks=(rank,),
                hosts=(host,) if host else (),
                confidence=0.95 if t0 is not None else 0.8,
                evidence={
                    "basis": "torchelastic error files: the smallest timestamp is the first failure",
                    "error_file": first.get("source"),
                    "exception": message[:2000],
                    "traceback_tail": first.get("detail"),
                    "failed_at_ns": t0,
                    "later_failures": later[:max_later],
                    "later_failures_total": len(later),
                },
            )
        )
    bad = [r for r in rows if r.get("event") == "nonfinite_loss"]
    if bad:
        bad.sort(key=lambda r: (r.get("step") is None, r.get("step") or 0, ts_ns(r) or 0, int(r["rank"])))
        first = bad[0]
        rank, host = int(first["rank"]), _host(int(first["rank"]), first.get("host"), r2h)
        value = str(first.get("message") or "nan").lower()
        step = first.get("step")
        same_step = sorted(int(r["rank"]) for r in bad if r.get("step") == step)
        followers = sorted({int(r["rank"]) for r in bad} - set(same_step))
        at = f" at step {step}" if step is not None else ""
        out.append(
            Finding(
                kind=FindingKind.NUMERICAL,
                severity=Severity.CRITICAL,
                category=Category.OVERFLOW if "inf" in value else Category.NAN_LOSS,
                summary=(
                    f"{_where(rank, host)}: loss {value}{at}, the first non-finite local loss"
                    + (f" (also ranks {same_step} at that step)" if len(same_step) > 1 else "")
                    + (f"; {len(followers)} rank(s) followed after the gradient all-reduce" if followers else "")
                ),
                ranks=tuple(same_step) if len(same_step) <= 2 else (rank,),
                hosts=tuple(sorted({h for r in same_step if (h := r2h.get(r))}))
                if len(same_step) <= 2
                else ((host,) if host else ()),  # fmt: skip
                confidence=0.9,
                evidence={
                    "basis": "numerics/rank-R.json: each rank's first non-finite local loss",
                    "step": step,
                    "loss": value,
                    "first_ranks": same_step,
                    "followed_by_ranks": followers,
                    "source": first.get("source"),
                },
            )
        )
    return out


def _ref(f: Finding) -> dict[str, Any]:
    return {
        "kind": f.kind.value,
        "category": f.category.value if f.category else None,
        "severity": f.severity.value,
        "ranks": list(f.ranks),
        "hosts": list(f.hosts),
        "summary": f.summary,
    }


def _fold(root: Finding, folded: list[Finding]) -> Finding:
    if not folded:
        return root
    ev = dict(root.evidence)
    prior = list(ev.get("followed_by", ()))
    ev["followed_by"] = (prior + [_ref(f) for f in folded])[:_MAX_FOLLOWED]
    ev["followed_by_total"] = int(ev.get("followed_by_total", len(prior))) + len(folded)
    return replace(root, evidence=ev)


def _hardware_root(f: Finding) -> bool:
    return f.kind is FindingKind.FAULTY_HOST and f.severity is Severity.CRITICAL and len(f.hosts) == 1


def _from_launcher(f: Finding) -> bool:
    return f.evidence.get("basis") == launcher_hang.BASIS


def _first_in_its_log(hang: Finding, findings: list[Finding]) -> Finding:
    """A hang read from logs is not the root when the log analyzer found, in the same incident, an
    earlier failure of a kind a hang follows from (a store the ranks could not reach, a network
    error): that one came first (evidence first_failure), and a peer's collective timed out after."""
    if hang.evidence.get("first_failure") is not False:
        return hang
    incident = hang.evidence.get("incident")
    return next(
        (
            f
            for f in findings
            if f.kind in CONSEQUENCE_KINDS
            and f.severity is Severity.CRITICAL
            and f.evidence.get("first_failure") is True
            and f.evidence.get("incident") == incident
        ),
        hang,
    )


def rank_root_cause(findings: Iterable[Finding]) -> list[Finding]:
    """Fold the consequences of the incident's root into it (module docstring); pure, order kept."""
    findings = list(findings)
    # the first failing rank of the error files, whatever its exception's kind (findings_from_run_events)
    crashes = [f for f in findings if f.evidence.get("error_file")]
    # a hardware fault the first failure's own exception reports is that failure, not a second root
    hardware = [f for f in findings if _hardware_root(f) and f not in crashes]
    hangs = [f for f in findings if f.kind is FindingKind.HUNG_COLLECTIVE and f.severity is Severity.CRITICAL]
    # A hang that names its rank first (an analyzer's before the launcher's record), then one that
    # names none: a watchdog's timeout line says who noticed, the launcher's record of a one-rank
    # hang says who stopped, and the second is the root.
    hangs.sort(key=lambda f: (not f.ranks, _from_launcher(f)))
    numerics = [f for f in findings if f.kind is FindingKind.NUMERICAL and f.evidence.get("first_ranks") is not None]

    root: Finding | None = None
    fold_hangs = False
    if hardware and crashes:
        # Hardware explains a crash only on its own host: else the first failing rank is the root
        # and the other host's hardware finding stands on its own.
        crash_hosts = {h for f in crashes[:1] for h in f.hosts}
        root = next((f for f in hardware if f.hosts[0] in crash_hosts), crashes[0])
        fold_hangs = True
    elif hardware:
        root, fold_hangs = hardware[0], True
    elif crashes:
        root, fold_hangs = crashes[0], True
    elif hangs:
        root = _first_in_its_log(hangs[0], findings)
    elif numerics:
        root = numerics[0]

    folded: list[Finding] = []
    out: list[Finding] = []
    root_ranks = set(root.ranks) if root else set()
    root_hosts = set(root.hosts) if root else set()
    for f in findings:
        if root is None or f is root:
            out.append(f)
            continue
        consequence = (
            f.kind in CONSEQUENCE_KINDS
            or _from_launcher(f)  # the record of the same incident, under whatever explains it
            # a hang report naming no rank (who noticed a timeout) under the hang that names one
            or (root.kind is FindingKind.HUNG_COLLECTIVE and f.kind is FindingKind.HUNG_COLLECTIVE and not f.ranks)
            or (fold_hangs and f.kind is FindingKind.HUNG_COLLECTIVE)
            # the first failure's exception reported its host's hardware fault (ECC, a lost GPU), which
            # the host's own record (its kernel log's Xid) shows as the root
            or (f in crashes and f.kind is FindingKind.FAULTY_HOST and set(f.hosts) <= root_hosts)
            or (f.kind is FindingKind.NUMERICAL and root.kind is FindingKind.NUMERICAL)
            # the root's own OOM again, as its log lines print it (the rank's log, the agent's copy)
            or (
                f.kind is FindingKind.OOM
                and root.kind is FindingKind.OOM
                and set(f.hosts) <= root_hosts
                and set(f.ranks) <= root_ranks
            )
        )
        if root.kind is FindingKind.NUMERICAL and f.kind is not FindingKind.NUMERICAL:
            consequence = False  # a NaN explains no crash or hang: those stay findings of their own
        if f.kind is FindingKind.STRAGGLER and root.kind is not FindingKind.NUMERICAL:
            if set(f.ranks) & root_ranks or (set(f.hosts) & root_hosts and not f.ranks):
                consequence = True
            elif f.severity is Severity.CRITICAL:
                f = replace(f, severity=Severity.WARNING, evidence={**f.evidence, "capped": "a crash or hang outranks"})
        if consequence:
            folded.append(f)
        else:
            out.append(f)
    if root is None:
        return out
    return [_fold(f, folded) if f is root else f for f in out]


def analyze_root_cause(findings: Iterable[Finding], signals: Signals) -> list[Finding]:
    """run_events -> findings, then rank_root_cause over everything (analyzers/__init__ runs it last)."""
    findings = list(findings)
    t = signals.table(SignalKind.RUN_EVENTS)
    if t is not None and t.num_rows:
        rows = t.to_pylist()
        r2h = signals.rank_to_host()
        findings = findings_from_run_events(rows, r2h) + findings
        if any(r.get("event") == launcher_hang.EVENT for r in rows):  # the recorders as frames only then
            hang = launcher_hang.launcher_hang_finding(
                rows, _frame(signals, SignalKind.COLLECTIVES), _frame(signals, SignalKind.STACKS), r2h
            )
            if hang is not None:
                findings.append(hang)
    return rank_root_cause(findings)


def _frame(signals: Signals, kind: SignalKind) -> Any:
    t = signals.table(kind)
    return t.to_pandas() if t is not None and t.num_rows else None
