"""The pods of a Kubernetes training job as collect targets, reached through `kubectl exec`.

`trainctl collect RUN_DIR --k8s-job NAME` runs the same commands in each pod that it runs on an
SSH host (manifest, tar of the run dir, kernel log, host facts, py-spy), through kubectl:

    kubectl [--context C] get pods --namespace NS --selector SEL --output json
    kubectl [--context C] exec --stdin --namespace NS POD [--container C] -- sh -c COMMAND

(kubectl's own flags, long forms, as `kubectl get --help` / `kubectl exec --help` print them.)
kubectl is the boundary: it carries authentication, contexts and the API server's address from
the user's kubeconfig, as `ssh` carries them from ~/.ssh/config.

Which pods: `--k8s-job NAME` tries, in order, the labels the controllers put on a job's pods:
- `training.kubeflow.org/job-name=NAME`: Kubeflow training-operator (PyTorchJob and friends);
- `jobset.sigs.k8s.io/jobset-name=NAME`: JobSet;
- `batch.kubernetes.io/job-name=NAME`, then the legacy `job-name=NAME`: a batch/v1 Job (the Job
  controller sets both since Kubernetes 1.27, only `job-name` before);
and the first selector that matches pods wins. `--k8s-selector` takes any selector as it is.

A pod's name in the dataset is its hostname (`spec.hostname` where the controller set one, e.g. an
Indexed Job's `NAME-INDEX`, else the pod name): that is what a rank sees as its host
(socket.gethostname(), trainctl's TRAINCTL_HOST default), so the run dir's `logs/H/`, `fr/H/` and
`timeline/host=H/` of a pod are attributed to that pod. The node each pod runs on is kept
(`PodTarget.node`): a faulty pod's machine is the node to drain.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainctl.collectors.ssh import CommandResult, CommandTimeout, HostUnreachable, OutputTooLarge
from trainctl.errors import CollectError, InputError

__all__ = [
    "JOB_LABELS",
    "PodTarget",
    "get_pods_argv",
    "exec_argv",
    "parse_pods",
    "KubectlClient",
    "find_job_pods",
]

# The labels a job's controller puts on its pods (see the module docstring), most specific first.
JOB_LABELS = (
    "training.kubeflow.org/job-name",
    "jobset.sigs.k8s.io/jobset-name",
    "batch.kubernetes.io/job-name",
    "job-name",
)
_READ_BYTES = 1 << 20
_MAX_STDERR_BYTES = 1 << 20


@dataclass(frozen=True)
class PodTarget:
    name: str  # the dataset's host name: the pod's hostname
    pod: str
    namespace: str
    node: str | None
    phase: str | None  # Pending | Running | Succeeded | Failed | Unknown
    container: str | None  # the first container (the training one in every controller above)


def _base(context: str | None) -> list[str]:
    return ["kubectl", *(["--context", context] if context else [])]


def get_pods_argv(namespace: str, selector: str, *, context: str | None = None) -> list[str]:
    return [*_base(context), "get", "pods", "--namespace", namespace, "--selector", selector, "--output", "json"]


def exec_argv(
    target: PodTarget, command: str, *, context: str | None = None, container: str | None = None
) -> list[str]:
    c = container or target.container
    return [
        *_base(context), "exec", "--stdin", "--namespace", target.namespace, target.pod,
        *(["--container", c] if c else []), "--", "sh", "-c", command,
    ]  # fmt: skip


def parse_pods(doc: str | bytes) -> list[PodTarget]:
    """Targets from `kubectl get pods --output json` (a v1 List of Pods), in hostname order (pure)."""
    try:
        data = json.loads(doc)
    except ValueError as exc:
        raise CollectError(
            f"kubectl get pods: not JSON ({exc}); is kubectl talking to a Kubernetes API server?"
        ) from exc
    items = data.get("items") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        raise CollectError("kubectl get pods: no 'items' list in its output (expected a v1 List of Pods)")
    out: list[PodTarget] = []
    for it in items:
        if not isinstance(it, Mapping):
            continue
        meta = it.get("metadata") if isinstance(it.get("metadata"), Mapping) else {}
        spec = it.get("spec") if isinstance(it.get("spec"), Mapping) else {}
        status = it.get("status") if isinstance(it.get("status"), Mapping) else {}
        pod = meta.get("name")
        if not isinstance(pod, str) or not pod:
            continue
        containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
        first = containers[0].get("name") if containers and isinstance(containers[0], Mapping) else None
        hostname = spec.get("hostname") if isinstance(spec.get("hostname"), str) and spec.get("hostname") else pod
        out.append(
            PodTarget(
                name=str(hostname),
                pod=pod,
                namespace=str(meta.get("namespace") or "default"),
                node=spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None,
                phase=status.get("phase") if isinstance(status.get("phase"), str) else None,
                container=first if isinstance(first, str) else None,
            )
        )
    return sorted(out, key=lambda t: t.name)


def _kubectl() -> str:
    exe = shutil.which("kubectl")
    if exe is None:
        raise InputError(
            "kubectl not found on PATH; install it (and a kubeconfig for the cluster) to collect from pods"
        )
    return exe


def find_job_pods(
    job: str | None,
    *,
    namespace: str,
    selector: str | None = None,
    context: str | None = None,
    runner: Callable[[list[str]], subprocess.CompletedProcess] | None = None,
) -> tuple[str, list[PodTarget]]:
    """(the selector that matched, the pods): `selector` as given, else the job labels in order."""
    run = runner or (lambda argv: subprocess.run(argv, capture_output=True, timeout=60))
    exe = _kubectl() if runner is None else "kubectl"
    candidates = [selector] if selector else [f"{label}={job}" for label in JOB_LABELS]
    for sel in candidates:
        argv = get_pods_argv(namespace, str(sel), context=context)
        argv[0] = exe
        res = run(argv)
        if res.returncode != 0:
            err = (res.stderr or b"").decode(errors="replace").strip().splitlines()
            raise CollectError(f"kubectl get pods failed ({err[-1] if err else f'exit {res.returncode}'})")
        pods = parse_pods(res.stdout)
        if pods:
            return str(sel), pods
    what = f"selector {selector!r}" if selector else f"job {job!r} (labels {', '.join(JOB_LABELS)})"
    raise InputError(f"no pods for {what} in namespace {namespace!r}; check --namespace and --context")


class KubectlSession:
    """Commands in one pod through `kubectl exec`: the interface collect uses of an SSH session."""

    def __init__(self, client: KubectlClient, target: PodTarget) -> None:
        self.client, self.target = client, target

    def __enter__(self) -> KubectlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass  # every command is its own kubectl process

    def _popen(self, command: str) -> subprocess.Popen:
        argv = exec_argv(self.target, command, context=self.client.context, container=self.client.container)
        argv[0] = self.client.kubectl
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        stdin: bytes | None = None,
        on_stdout: Callable[[bytes], None] | None = None,
        max_output_bytes: int | None = None,
    ) -> CommandResult:
        reader = self.stream(command, timeout_s=timeout_s, stdin=stdin)
        out: list[bytes] = []
        seen = 0
        try:
            while chunk := reader.read(_READ_BYTES):
                seen += len(chunk)
                if max_output_bytes is not None and seen > max_output_bytes:
                    raise OutputTooLarge(
                        f"{self.target.name}: the command wrote over {max_output_bytes} bytes; stopped reading"
                    )
                (on_stdout or out.append)(chunk)
            done = reader.finish()
        except BaseException:
            reader.close()
            raise
        return CommandResult(done.exit_code, b"".join(out), done.stderr, done.duration_s)

    def stream(
        self, command: str, *, timeout_s: float, stdin: bytes | None = None, keep_stdin_open: bool = False
    ) -> PodReader:
        """As SshSession.stream: stdout as a file object; `keep_stdin_open` to talk to the command."""
        proc = self._popen(command)
        reader = PodReader(self.target.name, proc, timeout_s, kubectl_errors=self.KUBECTL_ERRORS)
        if stdin:
            reader.send(stdin)
        if not keep_stdin_open:
            reader.close_stdin()
        return reader

    KUBECTL_ERRORS = True  # kubectl's own failure lines mean the pod is out of reach


class PodReader:
    """A pod command's stdout as a read-only file object, each read bounded by the command's deadline."""

    def __init__(self, name: str, proc: subprocess.Popen, timeout_s: float, *, kubectl_errors: bool = True) -> None:
        self.name, self._proc, self._timeout_s = name, proc, timeout_s
        self._kubectl_errors = kubectl_errors
        self._t0 = time.monotonic()
        self._deadline = self._t0 + timeout_s
        self.bytes_read = 0
        # stderr is drained as it comes (its first MiB kept): a command that writes much to stderr
        # must not block on a full pipe while we wait for its stdout.
        self._err: list[bytes] = []
        self._err_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err_thread.start()

    def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        kept = 0
        while chunk := self._proc.stderr.read1(_READ_BYTES):  # type: ignore[attr-defined]
            if kept < _MAX_STDERR_BYTES:
                self._err.append(chunk[: _MAX_STDERR_BYTES - kept])
                kept += len(chunk)

    def read(self, n: int = -1) -> bytes:
        out = self._proc.stdout
        assert out is not None
        remaining = self._deadline - time.monotonic()
        if remaining <= 0 or not select.select([out], [], [], remaining)[0]:
            self.close()
            raise CommandTimeout(
                f"{self.name}: command did not finish within {self._timeout_s:g}s; raise --timeout-s if the pod is just slow"
            )
        data = os.read(out.fileno(), _READ_BYTES if n is None or n < 0 else min(n, _READ_BYTES))
        self.bytes_read += len(data)
        return data

    def send(self, data: bytes) -> None:
        """More input for the command (a stream opened with keep_stdin_open)."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the command did not read its input; its exit status says what happened

    def close_stdin(self) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()
        except BrokenPipeError:
            pass

    def restart_clock(self) -> None:
        """A new `timeout_s` from now, for the next stage of a conversation (see ChannelReader)."""
        self._deadline = time.monotonic() + self._timeout_s

    def finish(self) -> CommandResult:
        while self.read(_READ_BYTES):
            pass
        try:
            code = self._proc.wait(timeout=max(0.1, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise CommandTimeout(f"{self.name}: command did not exit within {self._timeout_s:g}s") from exc
        self._err_thread.join(timeout=5)
        err = b"".join(self._err)
        self._proc.stdout.close()  # type: ignore[union-attr]
        if self._kubectl_errors and code == 1 and b"error: " in err and self.bytes_read == 0 and _is_kubectl_error(err):
            # kubectl itself failed (pod gone, not running, RBAC): the pod is out of reach
            raise HostUnreachable(f"{self.name}: {err.decode(errors='replace').strip().splitlines()[-1]}")
        return CommandResult(code, b"", err, time.monotonic() - self._t0)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self.close_stdin()


def _is_kubectl_error(stderr: bytes) -> bool:
    # kubectl prints its own failures as `error: ...` or `Error from server (...)` (cmdutil.CheckErr).
    text = stderr.decode(errors="replace")
    return any(line.startswith(("error: ", "Error from server")) for line in text.splitlines())


class KubectlClient:
    """`connect(name)` for collect: a session per pod, by the pod's dataset name."""

    def __init__(
        self, targets: Sequence[PodTarget], *, context: str | None = None, container: str | None = None
    ) -> None:
        self.targets = {t.name: t for t in targets}
        self.context, self.container = context, container
        self.kubectl = _kubectl()

    def connect(self, name: str) -> KubectlSession:
        return KubectlSession(self, self.targets[name])

    def describe(self) -> dict[str, Any]:
        return {t.name: {"pod": t.pod, "node": t.node, "phase": t.phase} for t in self.targets.values()}
