"""Printers the source inventory covers since issue 13 item 3's second pass (the NVIDIA driver, NVML/nvidia-smi,
DCGM, the Linux kernel, py-spy, procps, frameworks' own lines): their informational lines stay silent or below
warning, and their severities follow what the printer says (tests/fixtures/logs/source_lines.jsonl holds the
failure lines)."""

from __future__ import annotations

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind, Severity, sort_findings

# Lines of the same printers that report no failure (each as its source prints it).
NOT_FAILURES = [
    # open-gpu-kernel-modules kernel_rc.c: the GPU's UUID, logged once before its first Xid
    "NVRM: GPU at PCI:0000:06:00: GPU-9fe1319c-8dd3-44e4-2b74-de93f8b02c6a",
    # kernel-open/nvidia/nv.c: the module's load banner
    "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.45.04  Release Build  (dvs-builder@U22)  Mon Feb 16 2026",
    # nvidia-peermem.c peer_trace
    "nvidia-peermem nv_mem_client_init:588 TRACE nvidia-peermem loaded",
    # Linux aer.c: the detail lines under a PCIe Bus Error
    "pcieport 0000:00:03.1:   device [1022:1483] error status/mask=00000001/00006000",
    "pcieport 0000:00:03.1:    [ 0] RxErr                  (First)",
    # Linux err.c: the good end of a PCIe error recovery
    "pcieport 0000:00:1c.0: AER: device recovery successful",
    # py-spy src/dump.rs: the dump's header
    "Process 12345: /usr/bin/python -u train.py --nnodes 2",
    "Python v3.10.12 (/usr/bin/python3.10)",
    # dcgmi/Diag.cpp: passed and skipped tests (v3 and v4 rows)
    "| Memory                    | Pass - All                                     |",
    "| Diagnostic                | Pass - GPUs: 0, 1                              |",
    "|                           | GPU0: Pass                                     |",
    "| Deployment                | Skip - All                                     |",
    # nvidia-smi: an empty process table
    "|  No running processes found                                                             |",
    # procps ps aux: a running (R) rank
    "user     12345 99.0  2.1 123456789 2345678 ?   Rl   16:33 123:45 /usr/bin/python -u train.py",
    # Linux amdgpu_ras.c: a RAS query's all-clear ("no" for a count of none)
    "amdgpu 0000:0b:00.0: amdgpu: no uncorrectable hardware errors detected in umc block",
    # Linux aer.c aer_probe: the service starting on a root port
    "pcieport 0000:00:03.1: AER: enabled with IRQ 26",
    # frameworks' warnings that are not failures: accelerate utils/other.py check_os_kernel (a kernel that
    # "can cause the process to hang"), DeepSpeed runtime/zero/stage3.py allocator cache flushes
    "Detected kernel version 4.15.0, which is below the recommended minimum of 5.5.0; this can cause the process to "
    "hang. It is recommended to upgrade the kernel to the minimum version or higher.",
    "[2024-03-08 16:33:21,416] [WARNING] [stage3.py:1850:step] 4 pytorch allocator cache flushes since last step. "
    "this happens when there is high memory pressure and is detrimental to performance.",
    # frameworks' progress and normal ends
    "`Trainer.fit` stopped: `max_epochs=10` reached.",
    "Detected KeyboardInterrupt, attempting graceful shutdown ...",
    "[2024-03-08 16:33:21,416] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, skipped=5, lr=[0.0001], mom=[(0.9, 0.95)]",
    " iteration      300/  500000 | consumed samples:        38400 | elapsed time per iteration (ms): 1234.5 | "
    "learning rate: 1.500000E-04 | global batch size:   128 | lm loss: 2.345678E+00 | loss scale: 65536.0 | "
    "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "{'loss': 1.2345, 'grad_norm': 0.8765, 'learning_rate': 4.5e-05, 'epoch': 0.3}",
    # DCGM dcgmi/Nvlink.cpp: a GPU whose links are all up (U) or not supported (_)
    "        U U U U U U U U U U U U _ _ _ _ _ _",
    # logrus's and zap's informational lines (dcgm-exporter, the device plugin)
    'time="2022-09-29T12:09:09Z" level=info msg="Starting dcgm-exporter"',
    '{"level":"info","ts":"2025-01-28T06:47:16Z","caller":"diagnose/scan.go:263","msg":"scanning"}',
]

# Lines whose printer says the error was corrected: a finding at information level, never an alarm.
CORRECTED = [
    "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Correctable, Link 12 LTSSM Fault Up",
    "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:3b:00.0",
    "pcieport 0000:00:03.1: AER: Corrected error received: 0000:3b:00.0",
]


def _findings(text: str):
    return analyze_log_events(parse_log_text(text, source="node.log"))


@pytest.mark.parametrize("line", NOT_FAILURES)
def test_informational_line_gives_no_finding(line: str) -> None:
    assert _findings(line) == []


@pytest.mark.parametrize("line", CORRECTED)
def test_corrected_error_is_information(line: str) -> None:
    findings = _findings(line)
    assert findings and all(f.severity == Severity.INFO for f in findings)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("severity=Uncorrected (Fatal)", "severity=Uncorrectable (Fatal)"),
        ("severity=Uncorrected (Non-Fatal)", "severity=Uncorrectable (Non-Fatal)"),
        ("severity=Corrected", "severity=Correctable"),
    ],
)
def test_aer_severity_spelled_either_way(old: str, new: str) -> None:
    """Linux 6.x renamed aer_error_severity_string (the spec's terms): both spellings give one finding."""
    line = "nvidia 0000:3b:00.0: PCIe Bus Error: {}, type=Transaction Layer, (Receiver ID)"
    a, b = _findings(line.format(old)), _findings(line.format(new))
    assert [(f.kind, f.category, f.severity) for f in a] == [(f.kind, f.category, f.severity) for f in b]
    assert len(a) == 1


def test_sxid_severity_follows_the_switch() -> None:
    base = "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 24007, {}, Link 44 sourcetrack TCEN0 crumbstore ECC DBE Error"
    got = {sev: _findings(base.format(sev))[0].severity for sev in ("Fatal", "Non-fatal", "Correctable")}
    assert got == {"Fatal": Severity.CRITICAL, "Non-fatal": Severity.WARNING, "Correctable": Severity.INFO}


def test_fabric_managers_nvswitch_errors_are_the_switchs_and_nvidia_smi_may_say_gpu_in_lower_case() -> None:
    """The fabric manager's log (the format leptonai/gpud's fabric-manager component records) reports the same SXids
    as the driver: fatal critical, non-fatal warning, and the address is the NVSwitch's, not a GPU's."""
    fm = (
        "[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch {} error 20034 on fid 0 on NVSwitch pci bus id"
        " 00000000:86:00.0 physical id 3 port 33"
    )
    (fatal,), (non_fatal,) = _findings(fm.format("fatal")), _findings(fm.format("non-fatal"))
    assert (fatal.kind, fatal.category, fatal.severity) == (FindingKind.FAULTY_HOST, Category.NVLINK, Severity.CRITICAL)
    assert non_fatal.severity == Severity.WARNING
    assert fatal.summary.endswith("on NVSwitch 0000:86:00")
    assert fatal.evidence["switch_pcis"] == ["0000:86:00"] and "gpu_pcis" not in fatal.evidence  # not a GPU's
    sxid = "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 24007, Fatal, Link 44 sourcetrack TCEN0 crumbstore ECC DBE Error"
    assert _findings(sxid)[0].summary.endswith("on NVSwitch 0000:86:00")
    (lost,) = _findings("Unable to determine the device handle for gpu 0000:3B:00.0: GPU is lost.  Reboot the system")
    assert (lost.kind, lost.category, lost.severity) == (FindingKind.FAULTY_HOST, Category.GPU_LOST, Severity.CRITICAL)


def test_device_prefix_is_not_a_host() -> None:
    """'nvidia-nvswitch3: ' and 'pynvml.NVMLError_GpuIsLost: ' look like pdsh's 'host: ' and are printers; a rank
    tag in the same place ('rank3: ') is a rank, never a host."""
    for line in (
        "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 24007, Fatal, Link 44 sourcetrack TCEN0 crumbstore ECC DBE Error",
        "pynvml.NVMLError_GpuIsLost: GPU is lost",
        "rank3: RuntimeError: CUDA error: an illegal memory access was encountered",
    ):
        (finding,) = _findings(line)
        assert finding.hosts == () and finding.severity == Severity.CRITICAL


def test_pyspy_thread_waiting_in_a_collective_is_a_warning() -> None:
    """A dump's frames are kept on its thread line; one inside a collective says what the frame alone says."""
    head = ['Thread 12345 (idle): "MainThread"']
    waiting = head + ["    all_reduce (torch/distributed/distributed_c10d.py:2501)", "    train_step (train.py:88)"]
    busy = head + ["    load_batch (data.py:42)", "    train_step (train.py:88)"]
    assert _findings("\n".join(waiting))[0].severity == Severity.WARNING
    assert all(f.severity == Severity.INFO for f in _findings("\n".join(busy)))


# Linux mm/oom_kill.c dump_tasks rows (5.x columns; a dmesg timestamp before each), as pasted without the header.
OOM_TASK_ROWS = """[17798674.374062] [ 199244]  1000 199244     1907      677    49152        0          -998 bash
[17798674.374310] [ 201965]  1000 201965  5861879    47747  2015232    30009          -998 python
[17798674.374495] [ 202779]  1000 202779 274650088 243385180 1957441536     7930          -998 python
"""


def test_the_oom_killers_task_dump_alone_is_host_memory_exhausted() -> None:
    (f,) = analyze_log_events(parse_log_text(OOM_TASK_ROWS, source="t.log", host="node3"))
    assert (f.kind, f.severity, f.hosts) == (FindingKind.OOM, Severity.CRITICAL, ("node3",))
    header = "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name\n"
    assert analyze_log_events(parse_log_text(header, source="t.log"))[0].kind is FindingKind.OOM
    # one or two such rows prove nothing (another table's bracketed numbers)
    assert analyze_log_events(parse_log_text(OOM_TASK_ROWS.split("\n", 1)[0], source="t.log")) == []


def test_a_dataloader_worker_line_cut_before_its_signal_defers_to_the_shared_memory_advice() -> None:
    text = (
        "DataLoader worker (pid 270071) is killed by signal: \n"
        "Bus error. It is possible that dataloader's workers are out of shared memory. \n"
        "Please try to raise your shared memory limit. \n"
    )
    fs = analyze_log_events(parse_log_text(text, source="t.log"))
    assert fs[0].kind is FindingKind.OOM and fs[0].severity is Severity.CRITICAL
    (cut,) = analyze_log_events(parse_log_text(text.split("\n")[0], source="t.log"))
    assert (cut.kind, cut.severity) == (FindingKind.CRASH, Severity.WARNING)  # died, of what the line does not say


def test_pals_names_the_rank_a_signal_killed_and_the_launchers_kills_after_it_are_warnings() -> None:
    text = "rank 0 died from signal 11 and dumped core\nrank 4 died from signal 9\n"
    fs = analyze_log_events(parse_log_text(text, source="t.log"))
    assert [(f.ranks, f.severity) for f in fs] == [((0,), Severity.CRITICAL), ((4,), Severity.WARNING)]


def test_a_kubeflow_replica_that_exited_zero_is_no_failure() -> None:
    line = "INFO[0289] Pod: default.kfto-01-worker-0 exited with code 0  job=default.kfto-01 replica-type=worker"
    assert analyze_log_events(parse_log_text(line, source="t.log")) == []


def test_deepspeeds_launcher_killing_its_workers_after_an_echoed_ctrl_c_is_a_run_stopped_by_hand() -> None:
    text = (
        "step 5 loss 1.2\n^C[2024-05-26 15:06:40,046] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 22523\n"
    )
    fs = analyze_log_events(parse_log_text(text, source="t.log"))
    assert [(f.kind, f.severity) for f in fs] == [(FindingKind.HUNG_COLLECTIVE, Severity.WARNING)]
    assert fs[0].ranks == () and fs[0].hosts == ()
    failed = "RuntimeError: CUDA error: an illegal memory access was encountered\n" + text
    assert analyze_log_events(parse_log_text(failed, source="t.log"))[0].kind is FindingKind.CRASH
    # DeepSpeed's launcher killing its workers with no ^C before it is a teardown after a failure, not a hang
    torn = "[2024-05-26 15:06:40,046] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 22523\n"
    assert analyze_log_events(parse_log_text(torn, source="t.log"))[0].kind is FindingKind.CRASH


def test_gloos_libuv_assert_is_the_failure_and_the_abort_after_it_its_consequence() -> None:
    text = (
        "[/opt/pytorch/third_party/gloo/gloo/transport/uv/libuv.h:596] uv_accept: invalid argument\n"
        "*** SIGABRT received at time=1734086759 ***\n"
    )
    f = analyze_log_events(parse_log_text(text, source="t.log"))[0]
    assert (f.kind, f.category) == (FindingKind.NETWORK_ERROR, Category.GLOO)


@pytest.mark.parametrize(
    "line",
    ["[W] Encountered NaN loss at step 520, skipping batch", "step 3: inf gradients, update skipped", "NaN grad norm"],
)
def test_a_nan_or_inf_loss_said_in_prose_is_numerical(line: str) -> None:
    (f,) = analyze_log_events(parse_log_text(line + "\n", "x.log"))
    assert (f.kind, f.category) == (FindingKind.NUMERICAL, Category.NAN_LOSS)


@pytest.mark.parametrize(
    "line", ["train.py --skip-nan-loss --max-steps 100", "loss = torch.nan_to_num(loss)", "detect_nan_loss: true"]
)
def test_nan_words_that_are_options_or_code_are_silent(line: str) -> None:
    assert analyze_log_events(parse_log_text(line + "\n", "x.log")) == []


@pytest.mark.parametrize(
    ("line", "metric"),
    [
        # MXNet callback.py Speedometer: "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" per metric
        ("INFO:root:Epoch[3] Batch [100-200]\tSpeed: 512.30 samples/sec\taccuracy=nan", "accuracy"),
        # GluonCV scripts/detection/ssd/train_ssd.py: the metrics under their own names
        ("INFO:root:[Epoch 0][Batch 1], Speed: 41.284082 samples/sec, CrossEntropy=nan, SmoothL1=nan", "CrossEntropy"),
        # a NaN that stands as a value of its own, its name before it with no ':' or after it
        ("ep 33 train, step 11, ctc_4 nan, ctc_8 nan, ctc nan, num_seqs 9, 0.604 sec/step", "NaN"),
        # torchvision references/detection/utils.py MetricLogger.log_every: "Epoch: [e]  [i/n]  eta: ...  loss: v (mean)"
        ("Epoch: [2]  [ 40/500]  eta: 0:03:10  lr: 0.001  loss: 0.6412 (nan)  time: 0.41", "NaN"),
        # darknet examples/detector.c: "%ld: %f, %f avg loss, %f rate, %lf seconds, %d images"
        (" 28: -nan, -nan avg loss, 0.000000 rate, 0.797576 seconds, 1792 images", "NaN"),
    ],
)
def test_a_progress_lines_metric_printed_as_nan_is_numerical_whatever_its_name(line: str, metric: str) -> None:
    (f,) = analyze_log_events(parse_log_text(line + "\n", "x.log"))
    assert (f.kind, f.category) == (FindingKind.NUMERICAL, Category.NAN_LOSS)
    assert metric in f.summary


@pytest.mark.parametrize(
    "line",
    [
        "Epoch 1: val_loss improved from inf to 0.69315, saving model to best.h5",  # Keras ModelCheckpoint's start
        "step 10 eta: inf lr: 0.1",  # inf is a starting value too: only NaN counts
        "INFO:root:[Epoch 0][Batch 1], Speed: 41.28 samples/sec, CrossEntropy=0.512, SmoothL1=nan_guard_off",
        "Namespace(epochs=240, nan=True)",  # no step counter before it
        "step 300 | lm loss: 2.1 | number of nan iterations:   0 |",  # a word of the counter's name, not a value
        "step 12: skipped batch 'nan_samples', loss 2.31",
    ],
)
def test_a_progress_line_without_a_nan_metric_is_silent(line: str) -> None:
    assert analyze_log_events(parse_log_text(line + "\n", "x.log")) == []


def test_an_ofi_completion_error_is_the_transports_failure_the_watchdog_timeout_follows() -> None:
    text = (
        "ip-10-1-2-3:48213:48301 [3] NCCL WARN NET/OFI Request 0x7f3e7c0a1b00 completed with error. RC: 21. Error: 4097"
        " (Unknown error 4097). Completed length: 0, Request: { dev: 0, size: 0, state: CREATED, type: RECV }\n"
        "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88,"
        " OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
    )
    first, *rest = sort_findings(analyze_log_events(parse_log_text(text, "x.log")))
    assert (first.kind, first.severity) == (FindingKind.NETWORK_ERROR, Severity.CRITICAL)
    assert first.hosts == () and "Unknown error 4097" in first.summary
    assert [f.kind for f in rest] == [FindingKind.HUNG_COLLECTIVE]


@pytest.mark.parametrize(
    "line",
    [
        "./run.sh: line 12: 12345 Killed                  python train.py",  # bash jobs.c, a script's child
        "Killed",  # an interactive shell's
        # the shell's "Killed" over a progress line the program redraws with "\r": a copy of the screen
        "Killedg in train batch: 127687 / 263115",
    ],
)
def test_the_shells_report_of_a_child_sigkilled_is_an_out_of_memory_lead(line: str) -> None:
    (f,) = analyze_log_events(parse_log_text("Total number of batches 263115\n" + line + "\n", "x.log"))
    assert (f.kind, f.severity) == (FindingKind.OOM, Severity.WARNING)


def test_a_missing_command_beside_another_failure_is_only_its_evidence() -> None:
    text = (
        "/bin/sh: gpustat: command not found\n"
        "[E ProcessGroupNCCL.cpp:587] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1803000 milliseconds before timing out.\n"
    )
    fs = analyze_log_events(parse_log_text(text, "x.log"))
    assert [f.kind for f in fs] == [FindingKind.HUNG_COLLECTIVE]  # a side tool missing, the job ran on
    (alone,) = analyze_log_events(parse_log_text("/bin/sh: 1: torchrun: not found\n", "x.log"))
    assert alone.kind is FindingKind.CRASH and alone.summary.startswith(
        "the shell could not find 'torchrun' (exit 127)"
    )


def test_a_watchdog_timeout_whose_workncl_a_paste_put_on_the_next_lines_keeps_its_collective() -> None:
    text = (
        "[Rank 1] Watchdog caught collective operation timeout:\n"
        "WorkNCCL(SeqNum=12590, OpType=_ALLGATHER_BASE, NumelIn=1404928, NumelOut=2809856,\n"
        "         Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
    )
    (f,) = analyze_log_events(parse_log_text(text, "x.log"))
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.evidence["ops"] == ["_ALLGATHER_BASE"]
    assert f.evidence["seqs"] == [12590] and f.evidence["timeout_ms"] == [600000]


NVIDIA_SMI_Q_HEALTHY = """    Clocks Throttle Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 12
            DRAM Uncorrectable            : 0
    Remapped Rows
        Correctable Error                 : 2
        Uncorrectable Error               : 0
        Pending                           : No
        Remapping Failure Occurred        : No
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 0
        Pending Page Blacklist            : No
"""


def test_nvidia_smi_q_of_a_healthy_gpu_is_silent_and_its_faults_are_not() -> None:
    # the software power cap under load, corrected errors and zero counts are a working GPU
    assert analyze_log_events(parse_log_text(NVIDIA_SMI_Q_HEALTHY, "x.log")) == []
    faulty = NVIDIA_SMI_Q_HEALTHY.replace("SRAM Uncorrectable            : 0", "SRAM Uncorrectable            : 2")
    (f,) = analyze_log_events(parse_log_text(faulty, "x.log"))
    assert (f.kind, f.category) == (FindingKind.FAULTY_HOST, Category.ECC)
    # the pre-A100 "Retired Pages" section: pages retired for double-bit errors, or one waiting for the reset
    for field, value in (("Double Bit ECC                    : 0", "Double Bit ECC : 2"),
                         ("Pending Page Blacklist            : No", "Pending Page Blacklist : Yes")):  # fmt: skip
        (r,) = analyze_log_events(parse_log_text(NVIDIA_SMI_Q_HEALTHY.replace(field, value), "x.log"))
        assert (r.kind, r.category) == (FindingKind.FAULTY_HOST, Category.ECC), value
    hot = NVIDIA_SMI_Q_HEALTHY.replace("HW Slowdown                       : Not Active", "HW Slowdown : Active")
    (g,) = analyze_log_events(parse_log_text(hot, "x.log"))
    assert (g.kind, g.category) == (FindingKind.FAULTY_HOST, Category.POWER)
    # R450+ also says which slowdown: the plain "HW Slowdown" is their sum, not a second (power) fault
    for which, category in (("HW Thermal Slowdown", Category.THERMAL), ("HW Power Brake Slowdown", Category.POWER)):
        named = hot.replace("HW Slowdown : Active", f"HW Slowdown : Active\n            {which} : Active")
        (h,) = analyze_log_events(parse_log_text(named, "x.log"))
        assert (h.kind, h.category) == (FindingKind.FAULTY_HOST, category), which


def test_nvlink_crc_and_recovery_errors_are_a_marginal_link_and_replays_alone_are_not() -> None:
    """nvidia-smi nvlink -e (NVML nvmlDeviceGetNvLinkErrorCounter): CRC and recovery counts are a link of this host
    going bad; replays are the link correcting itself."""
    head = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-8a1c2f3e-0000-1111-2222-333344445555)\n"
    rows = "\t Link {n}: Replay Errors: {r}\n\t Link {n}: Recovery Errors: {v}\n\t Link {n}: CRC Errors: {c}\n"
    bad = head + rows.format(n=0, r=0, v=0, c=0) + rows.format(n=3, r=40, v=2, c=3456)
    (f,) = analyze_log_events(parse_log_text(bad, "x.log"))
    assert (f.kind, f.category, f.severity) == (FindingKind.FAULTY_HOST, Category.NVLINK, Severity.WARNING)
    assert all("Link 3" in line for line in f.evidence["lines"])
    assert analyze_log_events(parse_log_text(head + rows.format(n=0, r=0, v=0, c=0), "x.log")) == []
    replays = analyze_log_events(parse_log_text(head + rows.format(n=0, r=7, v=0, c=0), "x.log"))
    assert all(g.kind is not FindingKind.FAULTY_HOST for g in replays)


def test_a_cuda_error_finding_without_an_error_string_quotes_its_line() -> None:
    (f,) = analyze_log_events(parse_log_text("Failed to initialize NVML: Unknown Error\n", "x.log"))
    assert f.kind is FindingKind.CRASH and f.summary == "CUDA error: Failed to initialize NVML: Unknown Error"


@pytest.mark.parametrize(
    ("reason", "kind", "says"),
    [
        (" DUE TO TIME LIMIT", FindingKind.CRASH, "at its time limit"),
        (" DUE TO PREEMPTION", FindingKind.CRASH, "preempted"),
        ("", FindingKind.CRASH, "(scancel, or the scheduler)"),
        (" DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS", FindingKind.FAULTY_HOST, "after a node failure"),
    ],
)
def test_slurms_cancellation_says_why_the_scheduler_ended_the_job(reason: str, kind: FindingKind, says: str) -> None:
    """slurmstepd's "*** JOB J ON N CANCELLED AT T [DUE TO R] ***" (src/slurmd/slurmstepd): the scheduler ended the
    job, which no worker's failure did; the finding says which of its reasons, not 'a worker exited with a failure'."""
    text = f"slurmstepd: error: *** JOB 123456 ON node-7 CANCELLED AT 2024-03-01T10:00:00{reason} ***\n"
    (f,) = analyze_log_events(parse_log_text(text, source="t.log"))
    assert f.kind is kind and says in f.summary and "a worker exited" not in f.summary
    assert f.ranks == () and f.hosts == ()  # the node that printed it is not blamed


def _fabric(state: str, status: str) -> str:
    # nvidia-smi -q's Fabric section (r550+), as it prints nvmlGpuFabricInfo_t
    return (
        "    Fabric\n"
        f"        State                             : {state}\n"
        f"        Status                            : {status}\n"
        "        CliqueId                          : 0\n"
        "        ClusterUUID                       : 00000000-0000-0000-0000-000000000000\n"
    )


def test_a_gpu_whose_nvlink_fabric_registration_completed_with_an_error_is_a_faulty_host() -> None:
    """nvml.h: the fabric status is read once the state is Completed; a status other than Success there is a GPU the
    fabric manager could not register, on which CUDA will not start. Success, a registration still in progress, and a
    "Status" line of another section are no such finding."""
    (f,) = analyze_log_events(parse_log_text(_fabric("Completed", "Insufficient Resources"), source="t.log"))
    assert (f.kind, f.category, f.severity) == (FindingKind.FAULTY_HOST, Category.NVLINK, Severity.CRITICAL)
    assert "'Insufficient Resources'" in f.summary
    for healthy in (_fabric("Completed", "Success"), _fabric("In Progress", "N/A"), "Job\n  Status : Running\n"):
        assert analyze_log_events(parse_log_text(healthy, source="t.log")) == []


# sacct (slurm src/sacct/print.c, src/common/print_fields.c): the State column cut to 10 with a '+', ExitCode "%d:%d"
SACCT = (
    "JobID           JobName      State ExitCode\n"
    "------------ ---------- ---------- --------\n"
    "123456            train {state:>10}      {code}\n"
    "123456.batch      batch {state:>10}      {code}\n"
)


@pytest.mark.parametrize(
    "state, code, kind, severity",
    [
        ("OUT_OF_ME+", "0:125", FindingKind.OOM, Severity.CRITICAL),  # OUT_OF_MEMORY cut to the column
        ("NODE_FAIL", "0:0", FindingKind.FAULTY_HOST, Severity.WARNING),
        ("TIMEOUT", "0:0", FindingKind.CRASH, Severity.WARNING),
        ("FAILED", "1:0", FindingKind.CRASH, Severity.WARNING),
    ],
)
def test_sacct_rows_say_how_the_job_ended(state: str, code: str, kind: FindingKind, severity: Severity) -> None:
    (f, *_) = _findings(SACCT.format(state=state, code=code))
    assert (f.kind, f.severity, f.ranks, f.hosts) == (kind, severity, (), ())
    assert f.evidence["signatures"][0] == "sacct_job_state"


def test_sacct_rows_of_healthy_states_and_a_node_failure_beside_the_jobs_exit() -> None:
    for state in ("COMPLETED", "RUNNING", "PENDING"):
        assert _findings(SACCT.format(state=state, code="0:0")) == [], state
    # the job's FAILED row is the consequence of its step's node failure: the node failure comes first
    rows = SACCT.format(state="FAILED", code="1:0") + "123456.0         python  NODE_FAIL      0:0\n"
    assert _findings(rows)[0].kind is FindingKind.FAULTY_HOST


@pytest.mark.parametrize(
    "header",
    [
        "Exception in thread Thread-1:",  # CPython threading.py excepthook, before the thread's traceback
        "Exception in thread Thread-3 (_worker):",  # 3.10+: the target's name in brackets
        "The above exception was the direct cause of the following exception:",  # traceback.py _cause_message
        "During handling of the above exception, another exception occurred:",  # traceback.py _context_message
    ],
)
def test_a_paste_cut_after_cpythons_header_of_a_raised_exception_is_an_unclassified_error(header: str) -> None:
    (f,) = _findings(f"step 10 loss 2.31\n{header}\n")
    assert (f.kind, f.category, f.severity, f.ranks, f.hosts) == (
        FindingKind.CRASH,
        Category.UNCLASSIFIED,
        Severity.WARNING,
        (),
        (),
    )
    assert header in f.summary


def _ecc_blocks(single: int, double: int) -> str:
    """nvidia-smi -q's ECC Errors section before R525: a Single Bit and a Double Bit block of counters."""

    def block(name: str, total: int) -> str:
        rows = ("Device Memory", "Register File", "L1 Cache", "L2 Cache")
        return (
            f"            {name}            \n"
            + "".join(f"                {r:<28}: {total if r == 'Device Memory' else 0}\n" for r in rows)
            + "                Texture Memory              : N/A\n"
            + f"                Total                       : {total}\n"
        )

    return "    ECC Errors\n        Volatile\n" + block("Single Bit", single) + block("Double Bit", double)


def test_a_double_bit_total_of_the_old_nvidia_smi_q_is_an_uncorrectable_ecc_fault() -> None:
    (f,) = _findings(_ecc_blocks(single=0, double=2))
    assert (f.kind, f.category, f.severity) == (FindingKind.FAULTY_HOST, Category.ECC, Severity.WARNING)
    assert f.evidence["signatures"] == ["nvidia_smi_q_double_bit"]
    # single-bit errors are corrected; a Total line of anything else is no finding
    assert _findings(_ecc_blocks(single=7, double=0)) == []
    assert _findings("Memory usage\n    Total                       : 81920 MiB\n") == []
    assert _findings("Summary\n    Total : 12\n") == []


def test_a_monitored_barrier_report_names_the_ranks_that_never_came_not_a_reporter() -> None:
    """ProcessGroupGloo.cpp monitoredBarrier: rank 0 names the rank(s) that never reached it. One named is blamed;
    several are listed and none is blamed alone. Neither summary calls them the reporters."""
    (one,) = _findings("RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier in 30000 ms")
    assert one.ranks == (2,) and one.summary.startswith("rank 2 never reached the monitored barrier in 30000 ms")
    (two,) = _findings("RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 1800000 ms")
    assert two.kind is FindingKind.HUNG_COLLECTIVE and two.ranks == ()
    assert two.summary.startswith("ranks 1, 3 never reached the monitored barrier")
    assert "reported by" not in one.summary + two.summary
