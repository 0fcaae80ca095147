"""Collect from the pods of a Kubernetes training job (issue 17 item 4): a REAL launched run, split
into what each pod would hold, brought back through `kubectl exec` and diagnosed like the run dir.

kubectl is the faked boundary (tests/kube_pods.py: no API server on these machines); every command
it is asked to run in a pod runs for real, in that pod's own view of the run dir path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube_pods import make_fake_kube  # noqa: E402 (tests/ is on sys.path)
from run_split import split_by_host  # noqa: E402

from trainctl import dataset

pytestmark = pytest.mark.slow


@pytest.mark.timeout(360)
def test_a_pytorchjobs_pods_are_collected_and_diagnosed_like_the_run_dir(cli, tmp_path: Path) -> None:
    local = tmp_path / "run"
    res = cli("launch", "--local", "--hosts-local", "2", "--nproc-per-node", "2", "--run-dir", local,
              "--inject", "straggler:rank=2,factor=2", "--", "--steps", "40", timeout=240)  # fmt: skip
    assert res.code == 0, res.stderr
    kube = make_fake_kube(tmp_path / "kube", "pytorchjob_pods.json")
    remote_run = kube.remote_root / "runs" / "llm"
    placed = split_by_host(local, kube, remote_run)  # the master pod is node01, worker-0 is node02
    assert placed["node02"] and placed["node01"]

    out = tmp_path / "ds"
    col = cli("collect", remote_run, "--k8s-job", "llm-pretrain", "--namespace", "training", "--context", "test-ctx",
              "--out", out, "--json", env=kube.env(), timeout=120)  # fmt: skip
    assert col.code == 0, col.stderr
    summary = json.loads(col.stdout)
    assert summary["failed_hosts"] == ["llm-pretrain-worker-1"]  # its pod completed: kubectl refuses exec
    assert "3 pods (training.kubeflow.org/job-name=llm-pretrain)" in col.stderr
    assert "node02 on gpu-b02" in col.stderr

    # Every kubectl call had the documented argv; the other job's pod was never touched.
    calls = kube.argv_log()
    assert calls[0] == ["--context", "test-ctx", "get", "pods", "--namespace", "training", "--selector",
                        "training.kubeflow.org/job-name=llm-pretrain", "--output", "json"]  # fmt: skip
    execs = [c for c in calls if c[2] == "exec"]
    assert {c[6] for c in execs} == {"llm-pretrain-master-0", "llm-pretrain-worker-0", "llm-pretrain-worker-1"}
    assert all(c[2:6] == ["exec", "--stdin", "--namespace", "training"] and c[7:9] == ["--container", "pytorch"]
               and c[9:11] == ["--", "sh"] for c in execs)  # fmt: skip

    # The same timelines came back, and the straggler is found on the same rank and pod.
    def rows(root: Path) -> list:
        return sorted(tuple(r.values()) for r in dataset.read_table(root, "timeline").to_pylist())

    assert rows(out) == rows(local)
    diag = json.loads(cli("diagnose", out, "--json", "--fail-on", "never").stdout)
    slow = [f for f in diag["findings"] if f["kind"] == "straggler" and f["ranks"] == [2]]
    assert [(f["hosts"], f["category"]) for f in slow] == [(["node02"], "compute")]
    status = dataset.read_table(out, "collection_status").to_pylist()
    gone = [r for r in status if r["host"] == "llm-pretrain-worker-1"]
    assert gone and {r["error_type"] for r in gone} == {"unreachable"}
    assert all("cannot exec into a container in a completed pod; current phase is Failed" in r["error"] for r in gone)


@pytest.mark.timeout(60)
def test_a_pod_command_that_floods_stderr_neither_blocks_nor_fills_memory(tmp_path: Path, monkeypatch) -> None:
    from trainctl.collectors.kubectl import KubectlClient, parse_pods

    kube = make_fake_kube(tmp_path / "kube", "pytorchjob_pods.json")
    monkeypatch.setenv("PATH", kube.env()["PATH"])
    client = KubectlClient([t for t in parse_pods(json.dumps(kube.pods())) if t.name == "node01"])
    with client.connect("node01") as sess:
        res = sess.run("head -c 3000000 /dev/zero >&2; echo done; exit 3", timeout_s=30)
    assert (res.exit_code, res.stdout) == (3, b"done\n")
    assert len(res.stderr) == 1 << 20  # the first MiB kept, the rest drained and dropped
