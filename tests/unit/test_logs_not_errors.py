"""Error-looking lines that are not a failure of the run: NCCL <= 2.4's WARN that it found no IB
verbs library (it goes on over sockets; later releases print it as INFO), and a traceback the user's
Ctrl-C raised (KeyboardInterrupt). Quoting them as "unclassified error" hid what the log does show:
a stalled NCCL init, a process the user found waiting."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind

# NCCL 2.4.2's init as it printed it (misc/ibvwrap.cu WARN; init.cc INFO lines), stopping before
# "Init COMPLETE": two ranks, the second never connected.
NCCL_24_STALLED_INIT = """\
host-a:10379:10379 [0] NCCL INFO NET/Socket : Using [0]eth0:10.4.241.186<0>
host-a:10379:10379 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).

host-a:10379:10379 [0] misc/ibvwrap.cu:63 NCCL WARN Failed to open libibverbs.so[.1]
NCCL version 2.4.2+cuda10.0
host-a:10379:10390 [0] NCCL INFO Setting affinity for GPU 0 to ff
host-a:10379:10390 [0] NCCL INFO comm 0x7ff1c0001920 rank 0 nranks 2 cudaDev 0 nvmlDev 0
host-a:10379:10390 [0] NCCL INFO Channel 00 :    0   1
host-a:10379:10390 [0] NCCL INFO Ring 00 : 1 -> 0 [receive] via NET/Socket/0
"""

# CPython's traceback of a KeyboardInterrupt in torch.distributed.launch's wait for its workers.
CTRL_C_ON_LAUNCHER = """\
^CTraceback (most recent call last):
  File "/opt/conda/lib/python3.8/runpy.py", line 194, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/launch.py", line 260, in main
    process.wait()
  File "/opt/conda/lib/python3.8/subprocess.py", line 1083, in wait
    return self._wait(timeout=timeout)
  File "/opt/conda/lib/python3.8/subprocess.py", line 1806, in _wait
    (pid, sts) = self._try_wait(0)
  File "/opt/conda/lib/python3.8/subprocess.py", line 1764, in _try_wait
    (pid, sts) = os.waitpid(self.pid, wait_flags)
KeyboardInterrupt
"""


def _findings(text: str):
    return analyze_log_events(parse_log_text(text, source="x.log"))


def test_nccl_24s_libibverbs_warning_is_not_the_failure_the_stalled_init_is() -> None:
    findings = _findings(NCCL_24_STALLED_INIT)
    assert findings and findings[0].kind is FindingKind.HUNG_COLLECTIVE, [f.summary for f in findings]
    assert "unclassified" not in findings[0].summary
    assert findings[0].confidence < 0.5 and not findings[0].hosts


def test_the_same_warning_beside_a_real_error_does_not_hide_it() -> None:
    findings = _findings(NCCL_24_STALLED_INIT + "RuntimeError: something the signatures do not know\n")
    assert findings[0].kind is FindingKind.CRASH and "unclassified" in findings[0].summary


def test_a_ctrl_c_traceback_is_read_as_a_process_found_waiting() -> None:
    findings = _findings(CTRL_C_ON_LAUNCHER)
    assert findings and findings[0].kind is FindingKind.HUNG_COLLECTIVE, [f.summary for f in findings]
    assert "interrupted (Ctrl-C)" in findings[0].summary and "wait" in findings[0].summary


def test_a_traceback_ending_in_another_exception_is_still_an_error() -> None:
    text = CTRL_C_ON_LAUNCHER.replace("KeyboardInterrupt", "ChildProcessError: [Errno 10] No child processes")
    findings = _findings(text)
    assert findings and findings[0].kind is FindingKind.CRASH, [f.summary for f in findings]
