"""Evicting from a run that `trainctl launch --hosts` started: its members, and its relaunch without the hosts.

Everything here goes through trainctl.ops.launch.run_control's public functions
(`launch_options`, `relaunch_plan_for`, `relaunch_without`, `wait_relaunch`), so the plan a dry run
shows is the one the relaunch executes. Kept apart from trainctl.ops.evict.operation, which the
supervisor imports: run_control reaches the launch command, which imports the supervisor.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trainctl.errors import InputError
from trainctl.ops.evict.operation import Confirm, Progress, RelaunchOutcome
from trainctl.ops.evict.quarantine import Ledger
from trainctl.ops.evict.relaunch_plan import PlanKind, RelaunchPlan
from trainctl.ops.launch import run_control
from trainctl.rundir import read_run_info

__all__ = ["LiveRelaunch", "run_members", "trainctl_argv"]

logger = logging.getLogger(__name__)


def trainctl_argv() -> list[str]:
    """How trainctl starts itself as a subprocess (a relaunched run must outlive this process).

    TRAINCTL_CMD when set (an operator's wrapper, e.g. on a bastion; split as shell words because it
    is the operator's configuration, never data from a run), else the console script next to this
    Python.
    """
    if os.environ.get("TRAINCTL_CMD"):
        return shlex.split(os.environ["TRAINCTL_CMD"])
    script = Path(sys.executable).parent / "trainctl"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from trainctl.cli.app import main; main()"]


def run_members(run: str | os.PathLike[str] | None, *, spares: tuple[str, ...] = ()) -> frozenset[str] | None:
    """The hosts an eviction from RUN may name: run.json's hosts and spares, the launch request's hosts
    and spares (launch.json or the live supervisor), and `spares` given now. None when RUN is not a run dir."""
    if run is None:
        return None
    info = read_run_info(run) if Path(run).is_dir() else None
    if info is None:
        return None
    hosts = {h.host for h in info.hosts} | {str(s) for s in (info.extra.get("spares") or [])} | set(spares)
    try:
        opts = run_control.launch_options(run)
        hosts |= set(opts.hosts) | set(opts.spares)
    except Exception as exc:  # noqa: BLE001 - a --local or finished run, or unreadable options: run.json's hosts only
        logger.info("no launch options for %s (%s): run.json's hosts only", run, exc)
    return frozenset(hosts)


@dataclass(frozen=True)
class LiveRelaunch:
    """Stop the `trainctl launch --hosts` run (EvictRequest.run) and start it again without the hosts.

    The new run resumes from the newest complete checkpoint in the run's shared --checkpoint-dir,
    on the remaining hosts plus spares, or smaller when no spare is left and shrinking is allowed
    (relaunch_plan.shrink_allowed). `confirmed`: the operator said yes (--yes, or a playbook's own
    destructive gate); otherwise `confirm` is asked, and without one the eviction refuses.
    """

    spares: tuple[str, ...] | None = None  # None: the launch's own --spares
    allow_shrink: bool = False
    wait_timeout_s: float = 1800.0
    confirmed: bool = False
    trainctl: tuple[str, ...] = field(default_factory=lambda: tuple(trainctl_argv()))
    needs_run_dir: bool = True

    def plan(self, run: str | None, hosts: tuple[str, ...], ledger: Ledger) -> RelaunchPlan:
        plan, _ = run_control.relaunch_plan_for(
            run,
            list(hosts),
            spares=list(self.spares) if self.spares else None,
            quarantined=sorted(ledger.quarantined_hosts()),
            allow_shrink=self.allow_shrink,
        )
        return plan

    def check(self, run: str | None, hosts: tuple[str, ...], plan: RelaunchPlan, confirm: Confirm | None) -> None:
        who = ",".join(hosts)
        if plan.kind is PlanKind.STOP:
            raise InputError(f"cannot relaunch {run} without {who}: {plan.reason} (nothing was changed)")
        run_control.launch_options(run)  # the run's launch options must be known (InputError says how)
        if self.confirmed:
            return
        if confirm is None:
            raise InputError(
                f"--relaunch stops run {run} and starts it again without {who}; pass --yes to allow it "
                "(nothing was changed)"
            )
        if not confirm(f"stop {run} and relaunch it without {who}?"):
            raise InputError("relaunch declined; nothing changed (neither the ledger nor the run)")

    def perform(
        self, run: str | None, hosts: tuple[str, ...], ledger: Ledger, progress: Progress
    ) -> tuple[RelaunchPlan, RelaunchOutcome]:
        """Stop the run, start it again without the hosts, wait for it (it keeps running after the wait)."""
        plan, stopped, handle = run_control.relaunch_without(
            run,
            list(hosts),
            spares=list(self.spares) if self.spares else None,
            quarantined=sorted(ledger.quarantined_hosts()),
            trainctl=list(self.trainctl),
            allow_shrink=self.allow_shrink,
        )
        pid = handle.proc.pid if handle.proc is not None else "?"
        progress(
            f"stopped {run} ({stopped.get('supervisor')}); relaunched on {','.join(plan.hosts)} as {handle.run_dir} "
            f"(pid {pid}, log {handle.log_path}); waiting up to {self.wait_timeout_s:.0f}s"
        )
        res = run_control.wait_relaunch(handle, self.wait_timeout_s)
        return plan, RelaunchOutcome.from_report(plan, stopped, res)
