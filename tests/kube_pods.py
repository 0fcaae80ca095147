"""Pods of a Kubernetes job for collect tests, reached through a stand-in `kubectl` (no cluster here).

kubectl talks to an API server; there is none on these machines, so `kubectl` is the one thing
faked, at that boundary: a script on PATH that accepts exactly the argv forms trainctl uses, in
kubectl's long-flag spelling, prints `get pods --output json` as the API server's v1 List of Pods
(tests/fixtures/k8s/*.json, written from the core/v1 Pod schema with the labels each controller
sets), prints kubectl's own error lines for a missing pod or a completed one, and runs `exec`
commands for real with `sh`, each pod in its own mount namespace where the pod's private folder
appears at the one run dir path (as tests/sshd.py does for SSH hosts). Any other argv fails, as an
unknown flag or command fails in kubectl: the test checks the argv, not just the result.
"""

from __future__ import annotations

import json
from pathlib import Path

from standin_tool import StandInTool

FIXTURES = Path(__file__).parent / "fixtures" / "k8s"

_SCRIPT = r"""#!{python}
import json, os, subprocess, sys
STATE = {state!r}
argv = sys.argv[1:]
with open(os.path.join(STATE, "argv.log"), "a") as log:
    log.write(json.dumps(argv) + "\n")
def die(msg, code=1):
    sys.stderr.write(msg + "\n"); sys.exit(code)
if argv[:1] == ["--context"]:
    if len(argv) < 2 or argv[1] != "test-ctx":
        die('error: context was not found for specified context: ' + (argv[1] if len(argv) > 1 else ""))
    argv = argv[2:]
pods = json.load(open(os.path.join(STATE, "pods.json")))
if argv[:2] == ["get", "pods"] and len(argv) == 8 and argv[2::2] == ["--namespace", "--selector", "--output"] and argv[7] == "json":
    ns, sel = argv[3], argv[5]
    key, _, value = sel.partition("=")
    items = [p for p in pods["items"] if p["metadata"]["namespace"] == ns and p["metadata"]["labels"].get(key) == value]
    print(json.dumps({{"apiVersion": "v1", "items": items, "kind": "List", "metadata": {{"resourceVersion": ""}}}}, indent=4))
    sys.exit(0)
if argv[:3] == ["exec", "--stdin", "--namespace"] and "--" in argv:
    ns, pod = argv[3], argv[4]
    rest = argv[5:argv.index("--")]
    cmd = argv[argv.index("--") + 1:]
    if rest not in ([], ["--container", rest[-1] if rest else ""]) or cmd[:2] != ["sh", "-c"] or len(cmd) != 3:
        die("error: unknown flag or command form: " + json.dumps(argv))
    found = [p for p in pods["items"] if p["metadata"]["name"] == pod and p["metadata"]["namespace"] == ns]
    if not found:
        die('Error from server (NotFound): pods "%s" not found' % pod)
    if found[0]["status"]["phase"] in ("Succeeded", "Failed"):
        die("error: cannot exec into a container in a completed pod; current phase is %s" % found[0]["status"]["phase"])
    names = [c["name"] for c in found[0]["spec"]["containers"]]
    if rest and rest[1] not in names:
        die('error: container %s not found in pod %s' % (rest[1], pod))
    root = os.path.join(STATE, "pods", pod, "root")
    os.makedirs(root, exist_ok=True)
    inner = 'mount --bind "$1" "$2" && exec sh -c "$3"'
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh", root, {remote!r}, cmd[2]])
die("error: unknown command " + json.dumps(argv))
"""


class FakeKube(StandInTool):
    """A stand-in kubectl on `bin_dir` serving `pods.json`; each pod's files under host_root(hostname)."""

    def pods(self) -> dict:
        return json.loads((self.base / "pods.json").read_text())

    def host_root(self, hostname: str) -> Path:
        """The private folder of the pod whose hostname is `hostname`, seen at remote_root inside it."""
        pod = next(
            p["metadata"]["name"]
            for p in self.pods()["items"]
            if p["spec"].get("hostname", p["metadata"]["name"]) == hostname
        )
        return self.base / "pods" / pod / "root"


def make_fake_kube(base: Path, fixture: str) -> FakeKube:
    base.mkdir(parents=True, exist_ok=True)
    kube = FakeKube(base, base / "remote")
    (base / "pods.json").write_text((FIXTURES / fixture).read_text())
    kube.install("kubectl", _SCRIPT)
    return kube
