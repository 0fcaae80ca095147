"""Eviction as one operation: validate the hosts, quarantine them, drain them, plan (and do) the relaunch.

`evict_node(request)` is the one way trainctl takes hosts out of service. The CLI (`trainctl
evict-node`), the supervisor of a `launch --hosts` run and the playbook executor all build an
EvictRequest and get back a frozen EvictResult, so a dry run and a real run of any of them go
through the same steps in the same order:

1. targets   every host is validated (trainctl.ops.evict.targets) before anything changes: names or
             IPs, members of the run when it is known, no `ALL`, selector, option or glob;
2. commands  the scheduler argv for each host (trainctl.ops.evict.schedulers; argv lists, no shell);
3. plan      with a relaunch, the RelaunchPlan: for a live `launch --hosts` run the one that
             run_control.relaunch_without executes (trainctl.ops.evict.launched_run.LiveRelaunch),
             for the supervisor plan_relaunch over its own host list (SupervisedRelaunch);
   -- a dry run stops here and returns what it would do --
4. checks    a live relaunch that cannot happen (a STOP plan, unknown launch options, no consent)
             refuses before the ledger changes: the whole thing, not half of it;
5. ledger    each host is quarantined with its evidence (an audit record first);
6. drain     the scheduler commands run; a failure keeps the hosts quarantined and says how to retry;
7. relaunch  a live run is stopped and started again without the hosts (run_control), and waited
             for; the supervisor starts its next attempt itself from the returned plan.

Who passes what: the CLI and the playbook executor give `members` from
launched_run.run_members(RUN) (run.json plus the launch request's hosts and spares); the
supervisor gives its own hosts and spares.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from trainctl.errors import InputError, TrainctlError
from trainctl.findings import Finding, sort_findings
from trainctl.inventory import host_key
from trainctl.ops.evict.quarantine import Ledger, QuarantineEntry
from trainctl.ops.evict.relaunch_plan import RelaunchPlan, plan_relaunch, shrink_allowed
from trainctl.ops.evict.schedulers import SchedulerKind, drain_commands, format_argv, run_commands
from trainctl.ops.evict.targets import resolve_targets
from trainctl.rundir import RunInfo, is_run_dir, read_run_info

__all__ = [
    "Relaunch",
    "SupervisedRelaunch",
    "Confirm",
    "Progress",
    "EvictRequest",
    "RelaunchOutcome",
    "EvictResult",
    "evict_node",
    "load_finding",
]

logger = logging.getLogger(__name__)

Confirm = Callable[[str], bool]  # question -> the operator's answer
Progress = Callable[[str], None]


class Relaunch(Protocol):
    """How the run comes back without the evicted hosts: a plan, checks before anything changes, the act.

    Two kinds: SupervisedRelaunch (here; the supervisor starts its own next attempt) and
    trainctl.ops.evict.launched_run.LiveRelaunch (stop a `launch --hosts` run and start it again
    through run_control). Kept behind this protocol so this module never imports the launch code
    that imports the supervisor back.
    """

    needs_run_dir: bool

    def plan(self, run: str | None, hosts: tuple[str, ...], ledger: Ledger) -> RelaunchPlan: ...

    def check(self, run: str | None, hosts: tuple[str, ...], plan: RelaunchPlan, confirm: Confirm | None) -> None: ...

    def perform(
        self, run: str | None, hosts: tuple[str, ...], ledger: Ledger, progress: Progress
    ) -> tuple[RelaunchPlan, RelaunchOutcome | None]: ...


@dataclass(frozen=True)
class SupervisedRelaunch:
    """The supervisor's own next attempt: plan only (the supervisor's loop starts it)."""

    hosts: tuple[str, ...]  # the current attempt's hosts, in rank order
    spares: tuple[str, ...]
    nproc_per_node: int
    layout: Mapping[str, int] = field(default_factory=dict)
    script: str | None = None  # None: the reference trainer
    allow_shrink: bool = False  # the launch's --allow-shrink
    needs_run_dir: bool = False

    def plan(self, run: str | None, hosts: tuple[str, ...], ledger: Ledger) -> RelaunchPlan:
        may_shrink, hint = shrink_allowed(script=self.script, opt_in=self.allow_shrink)
        return plan_relaunch(
            self.hosts,
            quarantined=set(ledger.quarantined_hosts()) | set(hosts),
            spares=self.spares,
            nproc_per_node=self.nproc_per_node,
            layout=self.layout,
            allow_shrink=may_shrink,
            no_shrink_hint=hint,
        )

    def check(self, run: str | None, hosts: tuple[str, ...], plan: RelaunchPlan, confirm: Confirm | None) -> None:
        return None  # the supervisor acts on its own policy's decision; a STOP plan ends its loop

    def perform(
        self, run: str | None, hosts: tuple[str, ...], ledger: Ledger, progress: Progress
    ) -> tuple[RelaunchPlan, RelaunchOutcome | None]:
        # after the ledger change: other processes' evictions since the first plan count too
        return self.plan(run, hosts, ledger), None


@dataclass(frozen=True)
class EvictRequest:
    """What to evict and why. `targets` are as given (names, IPs, hostlists); evict_node validates them."""

    targets: tuple[str, ...]
    reason: str
    run: str | None = None  # a run dir (run.json gives its id, hosts and spares) or a bare run id
    findings: tuple[Mapping[str, Any], ...] = ()  # evidence; each host's ledger entry gets the first naming it
    scheduler: SchedulerKind = SchedulerKind.NONE
    relaunch: Relaunch | None = None
    members: frozenset[str] | None = None  # hosts the targets must be among; None: from the run dir
    ledger_extra: Mapping[str, Any] = field(default_factory=dict)  # more audit context (attempt, rule)
    dry_run: bool = False


@dataclass(frozen=True)
class RelaunchOutcome:
    """What became of a live relaunch (run_control.wait_relaunch's report, typed)."""

    plan: RelaunchPlan
    stopped: Mapping[str, Any]  # what stopping the old run did (run_control.stop_run)
    ok: bool
    finished: bool
    exit_code: int | None
    run_dir: str
    hosts: tuple[str, ...]
    first_step: int | None
    last_step: int | None
    report: Mapping[str, Any]  # the whole report as run_control gave it (pid, log, command, ...)

    @classmethod
    def from_report(cls, plan: RelaunchPlan, stopped: Mapping[str, Any], res: Mapping[str, Any]) -> RelaunchOutcome:
        return cls(
            plan=plan,
            stopped=dict(stopped),
            ok=bool(res.get("ok")),
            finished=bool(res.get("finished")),
            exit_code=res.get("exit_code"),
            run_dir=str(res.get("run_dir", "")),
            hosts=tuple(res.get("hosts") or plan.hosts),
            first_step=res.get("first_step"),
            last_step=res.get("last_step"),
            report=dict(res),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self.report, "plan": self.plan.to_dict(), "stopped": dict(self.stopped)}


@dataclass(frozen=True)
class EvictResult:
    hosts: tuple[str, ...]  # validated, expanded
    reason: str
    run_id: str | None
    dry_run: bool
    ledger_path: str
    scheduler: SchedulerKind
    commands: tuple[tuple[str, ...], ...]  # run, or (dry run) that would run, in order
    findings: tuple[Mapping[str, Any], ...] = ()
    entries: tuple[QuarantineEntry, ...] = ()  # ledger entries written (none in a dry run)
    relaunch_plan: RelaunchPlan | None = None
    relaunch: RelaunchOutcome | None = None

    @property
    def commands_shell(self) -> tuple[str, ...]:
        """Each command as a person would type it (shell-quoted), for dry runs and logs."""
        return tuple(format_argv(c) for c in self.commands)

    def to_dict(self) -> dict[str, Any]:
        """The `trainctl evict-node --json` document (keys as before the operation moved out of the CLI)."""
        doc: dict[str, Any] = {
            "host": ",".join(self.hosts),
            "hosts": list(self.hosts),
            "reason": self.reason,
            "run": self.run_id,
            "dry_run": self.dry_run,
            "ledger": self.ledger_path,
            "scheduler": self.scheduler.value,
            "commands": [list(c) for c in self.commands],
            "finding": dict(self.findings[0]) if self.findings else None,
            "relaunch": (
                self.relaunch.to_dict()
                if self.relaunch is not None
                else (self.relaunch_plan.to_dict() if self.relaunch_plan is not None else None)
            ),
        }
        if not self.dry_run:
            doc["entry"] = self.entries[0].to_dict() if self.entries else None
            doc["entries"] = [e.to_dict() for e in self.entries]
        return doc


def _names(finding: Mapping[str, Any], hosts: Collection[str]) -> bool:
    keys = {host_key(h) for h in hosts}
    return any(host_key(str(h)) in keys for h in finding.get("hosts") or [])


def _parse_finding(doc: Any, where: str) -> Finding:
    try:
        return Finding.from_dict(doc)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise InputError(
            f"{where}: not a trainctl finding ({exc!r}); it needs kind, severity and summary as in `trainctl diagnose --json`"
        ) from exc


def load_finding(
    spec: str | Mapping[str, Any] | None, *, where: str = "--finding", hosts: Collection[str] | None = None
) -> dict[str, Any] | None:
    """A finding as evidence: inline JSON, `@FILE`, or a mapping; checked against the finding contract.

    With `hosts` (the hosts being evicted) the evidence must be about them: a finding that names none
    of them is refused (it would put another host's fault in their ledger entries), and from a whole
    `diagnose --json` report the finding that names them is taken, the report's first (most severe,
    root cause first, most confident: trainctl.findings.sort_findings) when several do.
    """
    if spec is None or spec == "":
        return None
    if isinstance(spec, Mapping):
        doc: Any = dict(spec)
    else:
        text = spec
        if spec.startswith("@"):
            path = Path(spec[1:])
            where = str(path)
            try:
                text = path.read_text()
            except OSError as exc:
                raise InputError(
                    f"{path}: cannot read the finding file ({exc.strerror}); pass --finding @FILE or inline JSON"
                ) from exc
            except UnicodeDecodeError as exc:  # a binary file: said as the JSON it is not, not a traceback
                raise InputError(
                    f"{path}: not JSON (not UTF-8 text: {exc.reason} at byte {exc.start}); pass one finding object "
                    "from `trainctl diagnose --json`"
                ) from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InputError(
                f"{where}: not JSON ({exc}); pass one finding object from `trainctl diagnose --json`"
            ) from exc
    who = ",".join(hosts or ())
    if isinstance(doc, dict) and isinstance(doc.get("findings"), list):  # a whole `diagnose --json` report
        found = [_parse_finding(f, f"{where}: a finding of the report") for f in doc["findings"]]
        if hosts is not None:
            about = [f for f in found if _names(f.to_dict(), hosts)]
            if not about:
                named = sorted({h for f in found for h in f.hosts}, key=host_key)
                raise InputError(
                    f"{where}: no finding of the report names {who} (its findings name "
                    f"{', '.join(named) or 'no host'}); pass the finding about {who}, or leave --finding out"
                )
            found = about
        if len(found) != 1 and hosts is None:
            raise InputError(
                f"{where}: a report with {len(found)} findings, not one finding; pass one object of its `findings`"
            )
        return sort_findings(found)[0].to_dict()
    finding = _parse_finding(doc, where).to_dict()
    if hosts is not None and not _names(finding, hosts):
        named = ", ".join(finding.get("hosts") or []) or "no host"
        raise InputError(
            f"{where}: the finding names {named}, not {who} ({finding['summary']!r}); pass the finding about "
            f"{who} (`trainctl diagnose RUN --json` lists each finding's hosts), or leave --finding out"
        )
    return finding


# -- the steps ---------------------------------------------------------------------------------


def _run_info(run: str | None) -> tuple[str | None, RunInfo | None]:
    """--run is a run dir (run.json gives the id and hosts) or a bare run id recorded as given."""
    if run is None:
        return None, None
    if is_run_dir(run):
        info = read_run_info(run)
        return (info.run_id if info else run), info
    return run, None


def _members(req: EvictRequest, info: RunInfo | None) -> frozenset[str] | None:
    """The hosts a target must be among: the caller's, else run.json's hosts and spares, else unknown."""
    if req.members is not None:
        return req.members
    if info is None:
        return None
    return frozenset({h.host for h in info.hosts} | {str(s) for s in (info.extra.get("spares") or [])})


def _evidence_for(host: str, findings: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first finding naming `host`; else the one finding given if it names no host at all. Never
    a finding about other hosts: it would record their fault as this host's."""
    named = next((f for f in findings if _names(f, (host,))), None)
    if named is not None:
        return named
    return findings[0] if len(findings) == 1 and not findings[0].get("hosts") else None


def evict_node(
    req: EvictRequest,
    *,
    ledger: Ledger | None = None,
    confirm: Confirm | None = None,
    progress: Progress = logger.info,
) -> EvictResult:
    """Validate, quarantine, drain and (with a relaunch) plan or relaunch; see the module docstring.

    Raises a TrainctlError (one line: the value and the fix) before anything changes when a target
    is refused, the reason is empty or the relaunch cannot happen; after the ledger changed, only
    when the drain or the relaunch itself fails (the message says the hosts stay quarantined).
    """
    ledger = ledger or Ledger()
    if not req.reason or not req.reason.strip():
        raise InputError(f"evicting {', '.join(req.targets) or 'a host'}: the reason is empty; say why (audit trail)")
    run_id, info = _run_info(req.run)
    hosts = resolve_targets(req.targets, members=_members(req, info), run_label=run_id)
    rl = req.relaunch
    if rl is not None and rl.needs_run_dir and info is None:
        raise InputError(
            f"--relaunch needs --run RUN_DIR holding run.json (got {req.run!r}); it gives the hosts and layout"
        )
    per_host = {h: [tuple(c) for c in drain_commands(req.scheduler, h, req.reason)] for h in hosts}
    commands = tuple(c for h in hosts for c in per_host[h])
    plan = rl.plan(req.run, hosts, ledger) if rl is not None else None
    result = EvictResult(
        hosts=hosts,
        reason=req.reason,
        run_id=run_id,
        dry_run=req.dry_run,
        ledger_path=str(ledger.state_path),
        scheduler=req.scheduler,
        commands=commands,
        findings=tuple(dict(f) for f in req.findings),
        relaunch_plan=plan,
    )
    if req.dry_run:
        return result

    if rl is not None and plan is not None:
        rl.check(req.run, hosts, plan, confirm)  # refuses the whole thing, before the ledger changes
    entries = []
    for h in hosts:
        entry = ledger.evict(
            h,
            reason=req.reason,
            run=run_id,
            finding=_evidence_for(h, req.findings),
            extra={"scheduler": req.scheduler.value, "commands": [list(c) for c in per_host[h]], **req.ledger_extra},
        )
        entries.append(entry)
        progress(f"quarantined {h} in {ledger.state_path} (eviction #{entry.evictions})")
    result = replace(result, entries=tuple(entries))
    try:
        for c in commands:
            progress(f"running: {format_argv(c)}")
        run_commands(commands)
    except TrainctlError as exc:
        # The ledger keeps the hosts (trainctl will not launch on them); the drain can be retried.
        who = ",".join(hosts)
        raise type(exc)(
            f"{who} {'is' if len(hosts) == 1 else 'are'} quarantined in the ledger, but the "
            f"{req.scheduler.value} drain failed: {exc}; fix it and rerun "
            f"`trainctl evict-node {who} --reason ... --scheduler {req.scheduler.value}`"
        ) from exc
    if rl is None:
        return result
    plan, outcome = rl.perform(req.run, hosts, ledger, progress)
    return replace(result, relaunch_plan=plan, relaunch=outcome)
