"""Nodes of a Slurm allocation for collect tests, reached through a stand-in `srun` (no slurmctld here).

srun talks to slurmctld and each node's slurmd; there are none on these machines, so `srun` is the
one thing faked, at that boundary: a script on PATH that accepts exactly the argv form
`trainctl collect --srun` uses (srun's long options with `=`: --jobid, --overlap, --nodes, --ntasks,
--ntasks-per-node, --nodelist as a Slurm hostlist expression, --kill-on-bad-exit), refuses a job id
other than the allocation's as srun does, and runs the task for real on every node at once, each in
its own mount namespace where that node's private folder appears at the one run dir path (as
tests/sshd.py and tests/kube_pods.py do), with the variables slurmstepd sets (SLURMD_NODENAME,
SLURM_NODEID, SLURM_PROCID, SLURM_JOB_ID). A node listed in `lost` is reported the way srun reports
a task killed on a node that went away, and its task never runs. Any other argv fails.
"""

from __future__ import annotations

import json
from pathlib import Path

from standin_tool import StandInTool

_SCRIPT = r"""#!{python}
import json, os, subprocess, sys
import hostlist
STATE = {state!r}
REMOTE = {remote!r}
argv = sys.argv[1:]
with open(os.path.join(STATE, "argv.log"), "a") as log:
    log.write(json.dumps(argv) + "\n")
cfg = json.load(open(os.path.join(STATE, "slurm.json")))
def die(msg, code=1):
    sys.stderr.write(msg + "\n"); sys.exit(code)
opts, i = {{}}, 0
while i < len(argv) and argv[i].startswith("--"):
    k, eq, v = argv[i][2:].partition("=")
    if k == "overlap" and not eq:
        opts[k] = True
    elif k in ("jobid", "nodes", "ntasks", "ntasks-per-node", "nodelist", "kill-on-bad-exit") and eq:
        opts[k] = v
    else:
        die("srun: unrecognized option '%s'" % argv[i])
    i += 1
cmd = argv[i:]
if cmd[:2] != ["sh", "-c"] or len(cmd) != 3:
    die("srun: error: unexpected command form: " + json.dumps(cmd))
job = opts.get("jobid", os.environ.get("SLURM_JOB_ID"))
if job != cfg["jobid"]:
    die("srun: error: Unable to confirm allocation for job %s: Invalid job id specified" % job)
nodes = hostlist.expand_hostlist(opts.get("nodelist", ""))
if not opts.get("overlap") or int(opts.get("nodes", 0)) != len(nodes) or int(opts.get("ntasks", 0)) != len(nodes) \
        or opts.get("ntasks-per-node") != "1" or opts.get("kill-on-bad-exit") != "0":
    die("srun: error: unexpected step geometry: " + json.dumps(opts))
unknown = [n for n in nodes if n not in cfg["nodes"]]
if unknown:
    die("srun: error: Required node not available (down, drained or reserved): " + ",".join(unknown))
procs = []
for idx, node in enumerate(nodes):
    if node in cfg.get("lost", []):
        sys.stderr.write("srun: error: %s: task %d: Killed\n" % (node, idx))
        continue
    root = os.path.join(STATE, "nodes", node, "root")
    os.makedirs(root, exist_ok=True)
    env = dict(os.environ, SLURMD_NODENAME=node, SLURM_NODEID=str(idx), SLURM_PROCID=str(idx), SLURM_JOB_ID=job)
    inner = 'mount --bind "$1" "$2" && exec sh -c "$3"'
    procs.append(subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh", root,
                                   REMOTE, cmd[2]], env=env))
codes = [p.wait() for p in procs]
sys.exit(1 if cfg.get("lost") and set(cfg["lost"]) & set(nodes) else max(codes or [0]))
"""


class FakeSlurm(StandInTool):
    """A stand-in srun on `bin_dir` for an allocation of `nodes`; each node's files under host_root(node)."""

    def host_root(self, node: str) -> Path:
        return self.base / "nodes" / node / "root"


def make_fake_slurm(base: Path, nodes: list[str], *, jobid: str = "4242", lost: tuple[str, ...] = ()) -> FakeSlurm:
    base.mkdir(parents=True, exist_ok=True)
    slurm = FakeSlurm(base, base / "remote")
    (base / "slurm.json").write_text(json.dumps({"jobid": jobid, "nodes": nodes, "lost": list(lost)}))
    slurm.install("srun", _SCRIPT)
    return slurm
