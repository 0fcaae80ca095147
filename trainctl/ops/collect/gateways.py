"""`trainctl collect ... --gateways gw1,gw2`: past one client, a tree through gateway hosts (issue 18 item 2).

One client's CPU bounds a flat fan-out (bench/fanout.py: ~30 ms per host). With gateways, the
client connects only to the gateways; each runs trainctl's own collect over its share of the hosts
(its subtree: contiguous slices of the host list, so `node[001-512]` keeps racks together) into a
scratch folder there, then streams that dataset back as one tar archive, which the client unpacks
into the one dataset. ClusterShell's gateway mode has the same shape; here the gateway runs
trainctl, so the per-host work (manifests, attribution, caps) is exactly the direct path's.

What the client checks, since a gateway is one more machine that could be wrong: every member of a
gateway's archive is a plain regular file under a plain relative path; a path about a host
(`<kind>/host=H/`, `logs|fr|stacks|kernel/H/`) is taken only from the gateway whose subtree holds H
(otherwise refused and recorded as `foreign_paths`, as in the direct path); the archive is capped
at the sum of its hosts' byte caps. A gateway that cannot be reached, or whose collect fails, makes
each of its hosts a failed host with that reason in collection_status: nothing is silent.

The gateway needs trainctl (the same version: `--gateway-python`, default the client's
interpreter path) and its own way to reach its hosts (`--gateway-ssh-config`, a path on the
gateway; default its ~/.ssh/config). Not incremental: each collect through gateways fetches every
file again (the gateways keep no state between runs).
"""

from __future__ import annotations

import json
import logging
import shlex
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trainctl.collectors import rundir_sync
from trainctl.collectors.remote_script import new_nonce
from trainctl.collectors.ssh import SshClient, error_type_of, fan_out
from trainctl.errors import CollectError, InputError
from trainctl.ops.collect.collection import (
    TAR_BUFSIZE,
    CollectOptions,
    CollectResult,
    HostReport,
    Progress,
    StatusRow,
    TarMemberRefused,
    write_status,
    write_tar_member,
)

__all__ = [
    "GatewayOptions",
    "assign_subtrees",
    "collect_via_gateways",
    "extract_archive",
    "owner_of",
    "reports_from_summary",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GatewayOptions:
    gateways: tuple[str, ...]
    python: str  # the interpreter with trainctl on the gateways
    ssh_config: str | None = None  # on the gateways: how they reach their hosts


def assign_subtrees(hosts: Sequence[str], gateways: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Contiguous, near-equal slices of `hosts` per gateway, in order (pure)."""
    if not gateways:
        raise InputError("--gateways is empty; pass at least one gateway host")
    if len(set(gateways)) != len(gateways):
        raise InputError(f"--gateways lists a host twice ({', '.join(gateways)}); name each gateway once")
    n, k = len(hosts), len(gateways)
    out: dict[str, tuple[str, ...]] = {}
    start = 0
    for i, gw in enumerate(gateways):
        size = n // k + (1 if i < n % k else 0)
        out[gw] = tuple(hosts[start : start + size])
        start += size
    return {gw: hs for gw, hs in out.items() if hs}


def owner_of(path: str) -> str | None:
    """The host a dataset path is about, or None for paths that name none (pure)."""
    comps = path.split("/")
    if len(comps) == 3 and comps[0] == "kernel":
        return comps[1]
    return rundir_sync.path_host(path)


def _remote_collect(o: CollectOptions, g: GatewayOptions, hosts: Sequence[str], scratch: str) -> str:
    q = shlex.quote
    argv = [
        g.python, "-m", "trainctl.cli.app", "collect", o.run_dir, "--hosts", ",".join(hosts), "--out", scratch,
        "--json", "--timeout-s", str(o.timeout_s), "--max-failed-hosts", str(len(hosts)),
        "--max-host-gib", str(o.max_host_bytes / 2**30), "--max-host-files", str(o.max_host_files),
        "--max-file-gib", str(o.max_file_bytes / 2**30),
        *(["--kinds", ",".join(o.kinds)] if o.kinds else []),
        *(["--ssh-config", g.ssh_config] if g.ssh_config else []),
        *(["--accept-new-host-keys"] if o.accept_new_host_keys else []),
    ]  # fmt: skip
    return f"mkdir -p {q(scratch)} && {' '.join(q(a) for a in argv)}"


def extract_archive(reader, out: Path, subtree: set[str], cap_bytes: int) -> tuple[dict[str, int], list[str]]:
    """Unpack a dataset archive collected elsewhere (a gateway's, a Slurm task's): (bytes written per
    owner host or "", refused paths: those about hosts outside `subtree`)."""
    written: dict[str, int] = {}
    refused: list[str] = []
    total = 0
    with tarfile.open(fileobj=reader, mode="r|", bufsize=TAR_BUFSIZE) as tf:
        for m in tf:
            name = m.name.removeprefix("./")
            if m.isdir() or not name:
                continue
            if not rundir_sync.safe_relpath(name):
                continue  # hidden or odd names (the gateway's own collect state): not part of the dataset
            if not m.isreg() or m.issparse():
                raise TarMemberRefused(f"gateway archive member {name[:200]!r} is not a plain regular file")
            owner = owner_of(name)
            if owner is not None and owner not in subtree:
                refused.append(name)
                continue
            total += m.size
            if total > cap_bytes:
                raise TarMemberRefused(f"gateway archive past its cap of {cap_bytes} bytes; transfer stopped")
            dest = out / name
            if owner is None and dest.exists():
                continue  # run.json and rank files: the first gateway's copy
            n = write_tar_member(tf, m, dest, int(m.mtime * 1e9))
            written[owner or ""] = written.get(owner or "", 0) + n
    return written, refused


def reports_from_summary(
    summary: dict,
    hosts: Sequence[str],
    written: dict[str, int],
    refused: list[str],
    sender: str,
    out: Path,
    started: datetime,
) -> list[HostReport]:
    """Host reports from a collect that ran elsewhere (its `--json` summary) and the archive it sent
    (bytes written per host, paths refused for naming hosts outside `hosts`); a refusal is recorded
    in collection_status under the first host, naming `sender`."""
    failed = set(summary.get("failed_hosts") or ())
    rows: dict[str, list[StatusRow]] = {h: [] for h in hosts}
    for r in summary.get("status") or ():
        if r.get("host") in rows:
            rows[r["host"]].append(StatusRow(**{k: r.get(k) for k in StatusRow.__dataclass_fields__}))
    reports = []
    for h in hosts:
        bad = [r for r in rows[h] if not r.ok]
        reports.append(
            HostReport(h, rows[h], written.get(h, 0), 0, h in failed, (bad[0].error if bad and h in failed else None))
        )
    if refused:
        others = sorted({str(owner_of(p)) for p in refused})
        why = (
            f"{sender} sent {len(refused)} file(s) of hosts it does not collect ({', '.join(others[:5])}), "
            f"e.g. {refused[0]}; refused"
        )
        row = StatusRow(hosts[0], "attribution", False, 0, 0, 0.0, rundir_sync.FOREIGN_PATHS, why)
        reports[0].rows.append(row)
        write_status(out, hosts[0], [row], started, part="gateway")
    return reports


def _failed(hosts: Sequence[str], gw: str, exc: BaseException | str, etype: str) -> list[HostReport]:
    why = f"via gateway {gw}: {exc}"
    return [
        HostReport(h, [StatusRow(h, "gateway", False, None, 0, 0.0, etype, why)], failed=True, error=why) for h in hosts
    ]


def collect_via_gateways(
    opts: CollectOptions,
    gw_opts: GatewayOptions,
    *,
    client: SshClient | None = None,
    progress: Progress | None = None,
) -> CollectResult:
    """Collect every host of `opts` through the gateways; never raises for a bad gateway or host."""
    if not opts.run_dir.startswith("/"):
        raise InputError(f"run dir {opts.run_dir!r} must be an absolute path (as on the hosts)")
    opts.out.mkdir(parents=True, exist_ok=True)
    client = client or SshClient(
        ssh_config=opts.ssh_config,
        connect_timeout_s=opts.connect_timeout_s,
        accept_new_host_keys=opts.accept_new_host_keys,
    )
    plan = assign_subtrees(list(opts.hosts), list(gw_opts.gateways))
    started = datetime.now(UTC)
    t0 = time.monotonic()

    def job(gw: str) -> list[HostReport]:
        hosts = plan[gw]
        scratch = f"/tmp/trainctl-gateway-{new_nonce()}"
        with client.connect(gw) as sess:
            try:
                res = sess.run(_remote_collect(opts, gw_opts, hosts, scratch), timeout_s=opts.timeout_s * 4 + 60)
                if res.exit_code != 0:
                    err = res.stderr.decode(errors="replace").strip().splitlines()
                    raise CollectError(f"collect on the gateway exited {res.exit_code}: {err[-1] if err else ''}")
                summary = json.loads(res.stdout.decode(errors="replace") or "{}")
                reader = sess.stream(
                    f"tar -C {shlex.quote(scratch)} -cf - .", timeout_s=opts.timeout_s * len(hosts) + 60
                )
                cap = opts.max_host_bytes * len(hosts) + (64 << 20)
                written, refused = extract_archive(reader, opts.out, set(hosts), cap)
                done = reader.finish()
                if done.exit_code != 0:
                    raise CollectError(f"tar on the gateway exited {done.exit_code}")
            finally:
                try:  # never mask what went wrong above; a leftover scratch folder is only disk
                    sess.run(f"rm -rf -- {shlex.quote(scratch)}", timeout_s=60)
                except (CollectError, OSError, EOFError) as exc:
                    logger.warning("%s: scratch %s not removed: %s", gw, scratch, exc)
        return reports_from_summary(summary, hosts, written, refused, f"gateway {gw}", opts.out, started)

    def done(outcome) -> None:
        if progress is not None:
            for rep in outcome.value or _failed(plan[outcome.host], outcome.host, outcome.error, "gateway"):
                progress(rep.host, rep.bytes_fetched, rep)

    group = fan_out(list(plan), job, on_done=done)
    reports: list[HostReport] = []
    for gw, outcome in group.outcomes.items():
        if outcome.ok:
            got = outcome.value
        else:
            got = _failed(plan[gw], gw, outcome.error, error_type_of(outcome.error) if outcome.error else "gateway")
            for rep in got:  # the gateway's hosts have no status of their own: write why
                write_status(opts.out, rep.host, rep.rows, started, part="collect")
        reports.extend(got)
    return CollectResult(opts.out, tuple(reports), time.monotonic() - t0)
