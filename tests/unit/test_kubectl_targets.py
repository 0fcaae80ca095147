"""Pods of a Kubernetes job as collect targets: discovery and argv (issue 17 item 4)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from trainctl.collectors.kubectl import JOB_LABELS, exec_argv, find_job_pods, get_pods_argv, parse_pods
from trainctl.errors import CollectError, InputError

PODS = (Path(__file__).parents[1] / "fixtures" / "k8s" / "pytorchjob_pods.json").read_text()


def test_pods_are_named_by_hostname_and_keep_their_node_and_first_container() -> None:
    got = {t.name: t for t in parse_pods(PODS)}
    assert list(got) == ["llm-pretrain-worker-1", "node01", "node02", "other-job-worker-0"]
    assert (got["node01"].pod, got["node01"].node, got["node01"].container) == (
        "llm-pretrain-master-0",
        "gpu-a17",
        "pytorch",
    )
    assert got["llm-pretrain-worker-1"].phase == "Failed" and got["node02"].namespace == "training"


def test_the_argv_is_kubectls_long_form() -> None:
    t = parse_pods(PODS)[1]
    assert get_pods_argv("training", "a=b", context="prod") == [
        "kubectl", "--context", "prod", "get", "pods", "--namespace", "training", "--selector", "a=b", "--output", "json",
    ]  # fmt: skip
    assert exec_argv(t, "echo hi") == [
        "kubectl", "exec", "--stdin", "--namespace", "training", "llm-pretrain-master-0", "--container", "pytorch",
        "--", "sh", "-c", "echo hi",
    ]  # fmt: skip


def _runner(doc_for: dict[str, str], calls: list[list[str]]):
    def run(argv: list[str]) -> subprocess.CompletedProcess:
        calls.append(argv)
        sel = argv[argv.index("--selector") + 1]
        return subprocess.CompletedProcess(argv, 0, doc_for.get(sel, '{"items": []}').encode(), b"")

    return run


def test_job_labels_are_tried_in_order_and_the_first_with_pods_wins() -> None:
    calls: list[list[str]] = []
    batch = json.dumps({"items": [{"metadata": {"name": "sft-0-x"}, "spec": {"hostname": "sft-0"}}]})
    sel, pods = find_job_pods("sft", namespace="ml", runner=_runner({"batch.kubernetes.io/job-name=sft": batch}, calls))
    assert sel == "batch.kubernetes.io/job-name=sft" and [p.name for p in pods] == ["sft-0"]
    assert [c[c.index("--selector") + 1] for c in calls] == [f"{label}=sft" for label in JOB_LABELS[:3]]


def test_no_pods_and_kubectl_failures_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="no pods for job 'ghost'.*namespace 'ml'"):
        find_job_pods("ghost", namespace="ml", runner=_runner({}, []))

    def forbidden(argv: list[str]) -> subprocess.CompletedProcess:
        err = b'Error from server (Forbidden): pods is forbidden: User "sre" cannot list resource "pods"\n'
        return subprocess.CompletedProcess(argv, 1, b"", err)

    with pytest.raises(CollectError, match="Forbidden"):
        find_job_pods(None, namespace="ml", selector="app=x", runner=forbidden)
    with pytest.raises(CollectError, match="not JSON"):
        parse_pods("<html>proxy login</html>")
    with pytest.raises(CollectError, match="no 'items'"):
        parse_pods('{"kind": "Status"}')
    assert parse_pods('{"items": [7, {"metadata": {}}, {"metadata": {"name": "p"}, "spec": []}]}')[0].name == "p"


def test_collect_takes_exactly_one_way_to_find_hosts(cli, tmp_path) -> None:
    both = cli("collect", "/runs/x", "--hosts", "node01", "--k8s-job", "j", "--out", tmp_path / "ds")
    none = cli("collect", "/runs/x", "--out", tmp_path / "ds")
    for res, got in ((both, "--hosts, --k8s-job"), (none, "none")):
        assert res.code == 1 and "Traceback" not in res.stderr
        assert f"exactly one of --hosts, --k8s-job, --k8s-selector (got {got})" in res.stderr


def test_a_blank_host_list_is_said_as_blank_not_as_missing(cli, tmp_path) -> None:
    """`--hosts ''` (an unset shell variable) was "got none", as if the option had not been passed."""
    for spec, said in (("", "empty host list"), (" , ", "--hosts ' , ' names no host")):
        res = cli("collect", "/runs/x", "--hosts", spec, "--out", tmp_path / "ds")
        assert res.code == 1 and "Traceback" not in res.stderr and "got none" not in res.stderr
        assert said in res.stderr
    assert not (tmp_path / "ds").exists()


def test_no_kubectl_on_path_is_a_clear_error(cli, tmp_path, monkeypatch) -> None:
    import os

    env = {**os.environ, "PATH": str(tmp_path)}  # nothing there
    res = cli("collect", "/runs/x", "--k8s-job", "j", "--out", tmp_path / "ds", env=env)
    assert res.code == 1 and "kubectl not found on PATH" in res.stderr and "Traceback" not in res.stderr
