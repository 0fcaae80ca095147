"""The host kernel: PCIe AER, machine checks, IOMMU faults, lockups, segfaults, EDAC."""

from __future__ import annotations

import signal as _signal

from trainctl.collectors.log_signatures.rule import (
    PCI,
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    named_self_post,
    sig,
)


def _aer_post(ev: Event) -> None:
    sev = ev.fields.get("aer_severity", "")
    if sev.endswith("(Fatal)"):
        ev.severity = S.CRITICAL
    elif sev in ("Corrected", "Correctable"):
        ev.severity = S.INFO


def _pcie_recovery_post(ev: Event) -> None:
    if ev.fields.get("pcie_recovery"):
        ev.severity = S.CRITICAL


def _mce_post(ev: Event) -> None:
    if ev.fields.get("mce_exception"):
        ev.severity = S.CRITICAL


def _edac_post(ev: Event) -> None:
    if ev.fields.get("edac") == "UE":  # uncorrected: data was lost
        ev.severity = S.CRITICAL


def _ghes_post(ev: Event) -> None:
    sev = ev.fields.get("ghes_severity")
    if sev in ("fatal", "recoverable"):  # data was lost (fatal: the firmware would reset; recoverable: not corrected)
        ev.severity = S.CRITICAL
    elif sev in ("corrected", "info"):
        ev.severity = S.INFO


def _panic_post(ev: Event) -> None:
    # mm/oom_kill.c panics "Out of memory and no killable processes..." / "System is deadlocked on memory", and
    # with vm.panic_on_oom "Out of memory: %s panic_on_oom is enabled": the host ran out of memory
    if "memory" in (ev.fields.get("panic") or "").lower():
        ev.kind, ev.category = K.OOM, None


def _openmpi_signal_post(ev: Event) -> None:
    try:
        ev.fields["signal"] = _signal.Signals(int(ev.fields["signo"])).name
    except ValueError:
        pass
    named_self_post(ev)


# kernel: PCIe AER and machine checks (Linux drivers/pci/pcie/aer.c, arch/x86/kernel/cpu/mce)
MACHINE: tuple[Signature, ...] = (
    sig(
        "pcie_aer_error",
        # aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)" with severity one of
        # "Uncorrected (Non-Fatal)", "Uncorrected (Fatal)", "Corrected" (aer_error_severity_string), spelled
        # "Uncorrectable (Non-Fatal)", "Uncorrectable (Fatal)", "Correctable" since Linux 6.x (the spec's terms).
        # The root port's own line: "AER: Uncorrected (Fatal) error received: <id>" (<= 5.x) and
        # "AER: Uncorrectable (Fatal) error message received from <id>" (aer_print_source, 6.x).
        r"(?:(?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): )?PCIe Bus Error: severity=(?P<aer_severity>"
        r"Uncorrect(?:ed|able) \((?:Non-)?Fatal\)|Correct(?:ed|able))"
        r"|AER: (?:Multiple )?(?P<aer_severity__2>Uncorrect(?:ed|able) \((?:Non-)?Fatal\)|Correct(?:ed|able)) error "
        r"(?:message )?received",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.WARNING,
        Blame.SELF,
        ["PCIe Bus Error", "AER:"],
        "Kernel AER: a PCIe error on this host's bus; Fatal is critical, Corrected is information.",
        post=_aer_post,
    ),
    sig(
        "pcie_containment",
        # drivers/pci/pcie/dpc.c dpc_process_error (dev_fmt "DPC: "): "containment event, status:%#06x source:%#06x"
        # (<= 6.x; 4.x "DPC containment event"), 6.x "containment event, status:%#06x: unmasked uncorrectable error
        # detected": the port took its link down, cutting off the device below it (a GPU, a NIC). err.c
        # pcie_do_recovery (dev_fmt "AER: "): "device recovery failed", "subordinate device reset failed": the
        # device stays lost. ("device recovery successful" is the good end: not taken.)
        r"DPC:? containment event, status:0x[0-9a-fA-F]+"
        r"|AER: (?P<pcie_recovery>device recovery failed|subordinate device reset failed)",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.WARNING,
        Blame.SELF,
        ["containment event", "device recovery failed", "subordinate device reset failed"],
        "Kernel PCIe: a port contained an error by taking its link down (warning); recovery failed (critical).",
        post=_pcie_recovery_post,
    ),
    sig(
        "machine_check",
        # mce/core.c: pr_emerg(HW_ERR "CPU %d: Machine Check%s: %Lx Bank %d: %016Lx"), and mce_notify_irq's
        # pr_info(HW_ERR "Machine check events logged"); HW_ERR is "[Hardware Error]: ".
        r"\[Hardware Error\]: (?:CPU (?P<cpu>\d+): Machine Check(?P<mce_exception> Exception)?: [0-9a-fx]+ Bank (?P<bank>\d+)"
        r"|Machine check events logged)",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["Hardware Error"],
        "Kernel machine check: the CPU or host memory reported a hardware error (a Machine Check Exception is fatal).",
        post=_mce_post,
    ),
    sig(
        "iommu_fault",
        # drivers/iommu/amd/iommu.c amd_iommu_report_page_fault: dev_err(dev, "Event logged [IO_PAGE_FAULT
        # domain=0x%04x address=0x%llx flags=0x%04x]") (older: "AMD-Vi: Event logged [IO_PAGE_FAULT
        # device=..."); drivers/iommu/intel/dmar.c dmar_fault_do_one: "[DMA Read|Write NO_PASID] Request
        # device [%02x:%02x.%d] fault addr 0x%llx [fault reason 0x%02x] %s". The IOMMU blocked a device's
        # DMA: with GPUs, usually peer-to-peer through an IOMMU/ACS (NVIDIA: disable it for P2P), or a
        # device fault.
        rf"(?:(?:nvidia|amdgpu|mlx5_core) {PCI}: )?(?:AMD-Vi: )?Event logged \[IO_PAGE_FAULT|DMAR: \[DMA (?:Read|Write)"
        rf"[^\]\n]*\] Request device \[(?P<dmar_dev>[0-9a-f:.]+)\] fault addr",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["IO_PAGE_FAULT", "DMAR: [DMA"],
        "The host's IOMMU blocked a device's DMA (GPU peer-to-peer through an IOMMU/ACS, or a device fault).",
    ),
    sig(
        "kernel_lockup",
        # kernel/watchdog.c: pr_emerg("BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]"), hard lockups
        # ("Watchdog detected hard LOCKUP on cpu %d"), and kernel/hung_task.c: pr_err("INFO: task %s:%d
        # blocked for more than %ld seconds."): the host's kernel is stuck (a driver spinning, storage
        # that does not answer); a training process named there is stuck with it.
        # (The "[comm:pid]" tail is optional: a pasted or wrapped line is often cut there.)
        r"BUG: soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<stuck_s>\d+)s!(?: \[(?P<proc>[^:\]\n]+):(?P<pid>\d+)\])?"
        r"|Watchdog detected hard LOCKUP on cpu (?P<cpu2>\d+)"
        r"|INFO: task (?P<task>[^:\s]+):(?P<task_pid>\d+) blocked for more than (?P<blocked_s>\d+) seconds"
        # kernel/rcu/tree_stall.h (5.x+): pr_err("INFO: %s self-detected stall on CPU"), print_other_cpu_stall's
        # pr_err("INFO: %s detected stalls on CPUs/tasks:"): a CPU held off RCU for the stall timeout (21 s)
        r"|INFO: (?P<rcu>rcu_\w+) (?:self-)?detected stalls? on CPU",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["soft lockup", "hard LOCKUP", "blocked for more than", "detected stall"],
        "The host's kernel reported a CPU lockup or a task stuck in the kernel (driver or storage).",
    ),
    sig(
        "kernel_stack_in_nvidia",
        # A kernel stack frame inside an NVIDIA kernel module: /proc/PID/stack and older oopses/hung-task
        # dumps "[<ffffffffc33d41c2>] uvm_spin_loop+0xb2/0xe0 [nvidia_uvm]" (fs/proc/base.c proc_pid_stack,
        # "[<%pK>] %pB"), newer "Call Trace:" frames " uvm_spin_loop+0xb2/0xe0 [nvidia_uvm]"
        # (lib/vsprintf.c %pB: symbol+off/size [module]). A process whose kernel stack sits in the
        # driver is stuck there (unkillable, D state): the host's driver, not the training code.
        r"^(?:\[<[0-9a-f]{1,16}>\]\s+)?(?:\? )?(?P<kfunc>\w+)\+0x[0-9a-f]+/0x[0-9a-f]+ "
        r"\[(?P<kmodule>nvidia(?:_uvm|_modeset|_drm|_peermem)?)\]",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["[nvidia"],
        "A kernel stack frame inside the NVIDIA driver: a process stuck in the driver on this host.",
        generic=True,
    ),
    sig(
        "kernel_rip_in_gpu_driver",
        # An oops or WARN whose faulting instruction is in a GPU kernel driver: arch/x86/kernel/dumpstack.c
        # show_ip prints "RIP: %04x:%pS" ("RIP: 0010:svm_range_evict_svm_bo_worker+0x313/0x330 [amdgpu]"), the
        # module in brackets (lib/vsprintf.c %pS). The host's driver hit a bug or a hardware fault there.
        r"\bRIP: [0-9a-f]{4}:(?P<kfunc>\w+)\+0x[0-9a-f]+/0x[0-9a-f]+ \[(?P<kmodule>nvidia(?:_uvm|_modeset|_drm|_peermem)?"
        r"|amdgpu|amdkfd|habanalabs)\]",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.CRITICAL,
        Blame.SELF,
        ["rip: "],
        "The kernel oopsed (or warned) inside a GPU driver on this host.",
    ),
    sig(
        "kernel_segfault",
        # arch/x86/mm/fault.c show_signal_msg: "%s[%d]: segfault at %lx ip %px sp %px error %lx" then " in %s[...]"
        # (6.x adds " likely on CPU %d (core %d, socket %d)"); arch/x86/kernel/traps.c: "traps: %s[%d] general
        # protection fault ip:%lx sp:%lx error:%lx in %s". The kernel saw that process die of SIGSEGV on this host.
        r"(?P<proc>[^\s\[\]]{1,64})\[(?P<pid>\d+)\]: segfault at [0-9a-f]+ ip [0-9a-f]+ sp [0-9a-f]+ error \d+"
        r"|traps: (?P<proc__2>[^\s\[\]]{1,64})\[(?P<pid__2>\d+)\] general protection(?: fault)? ip:[0-9a-f]+",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["segfault at", "general protection"],
        "The kernel's record of a process killed by SIGSEGV (segfault, general protection fault) on this host.",
        post=lambda ev: ev.fields.setdefault("signal", "SIGSEGV"),
    ),
    sig(
        "openmpi_signal",
        # Open MPI opal/util/stacktrace.c show_stackframe, a process's own signal handler (mpirun, horovodrun,
        # SageMaker): HOSTFORMAT "[%s:%05d] " then "*** Process received signal ***", "Signal: %s (%d)" (strsignal,
        # signo), "Signal code: ...", "Failing at address: %p", the frames, "*** End of error message ***".
        # The process on that host died of the signal named.
        r"^\[(?P<self_node>[\w.-]{1,253}):(?P<pid>\d+)\] Signal: (?P<signame>[^()\n]{1,60}) \((?P<signo>\d{1,2})\)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["] signal: "],
        "Open MPI's signal handler: the process on the host in brackets died of the signal named.",
        post=_openmpi_signal_post,
    ),
    sig(
        "apei_hardware_error",
        # drivers/acpi/apei/ghes.c ghes_print_estatus: "%s{%u}" HW_ERR "Hardware error from APEI Generic Hardware
        # Error Source: %d" (the firmware reported a hardware error: memory, PCIe, CPU), then drivers/firmware/efi/
        # cper.c cper_estatus_print's "event severity: %s" (cper_severity_str: recoverable, fatal, corrected, info).
        r"\[Hardware Error\]: (?:Hardware error from APEI Generic Hardware Error Source: \d+"
        r"|event severity: (?P<ghes_severity>fatal|recoverable|corrected|info)\b)",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["Hardware Error"],
        "The firmware (ACPI APEI) reported a hardware error on this host: fatal or recoverable critical.",
        post=_ghes_post,
    ),
    sig(
        "kernel_oops_or_panic",
        # arch/x86/mm/fault.c show_fault_oops: pr_alert("BUG: unable to handle page fault for address: %px") (5.1+),
        # before it "BUG: unable to handle kernel NULL pointer dereference at %px" / "... kernel paging request at";
        # kernel/panic.c panic(): pr_emerg("Kernel panic - not syncing: %s"). The host's kernel crashed (a driver's
        # bug or failing hardware): everything on the host went with it.
        r"BUG: unable to handle (?:page fault for address|kernel NULL pointer dereference|kernel paging request)"
        r"|Kernel panic - not syncing: (?P<panic>[^\n]{0,120})",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.CRITICAL,
        Blame.SELF,
        ["unable to handle", "Kernel panic"],
        "The host's kernel oopsed or panicked (a driver bug or failing hardware; out of memory where it says so).",
        post=_panic_post,
    ),
    sig(
        "ext4_fs_error",
        # fs/ext4/super.c __ext4_error / __ext4_error_inode: "EXT4-fs error (device %s): %s:%d: ..." (the file system
        # found corruption or an I/O error on its disk; it may remount read-only): the host's storage.
        r"EXT4-fs error \(device (?P<block_dev>[\w./-]+)\)",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["EXT4-fs error"],
        "The host's ext4 file system reported an error (corruption or disk I/O).",
    ),
    sig(
        "mce_amd_decoded",
        # Linux drivers/edac/mce_amd.c decode: pr_emerg(HW_ERR "MC%d Error: ...") / "MC4 Error (node %d): "
        # then the bank's description (mc4_mce_desc: "DRAM ECC error detected on the NB", ...), and
        # decode_error_status: "Error Status: Corrected error, no action required." / "Uncorrected ...".
        r"\[Hardware Error\]: MC(?P<bank>\d+) Error(?: \(node (?P<node>\d+)\))?: (?P<mce_what>[^\n]{1,120})",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["Hardware Error"],
        "AMD machine check decoded by the kernel: a CPU, cache or host-memory (DRAM ECC) error on this host.",
    ),
    sig(
        "edac_memory_error",
        # Linux drivers/edac/edac_mc.c edac_ce_error / edac_ue_error: edac_mc_printk(mci, KERN_WARNING,
        # "%d CE %s%son %s (...)") and "%d UE %s%son %s (...)", prefixed "EDAC MC%d: ".
        r"EDAC MC(?P<mc>\d+): (?P<edac_count>\d+) (?P<edac>CE|UE) (?P<edac_what>[^\n(]{0,80}?)on ",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["EDAC MC"],
        "Host memory errors counted by EDAC: corrected (CE, a failing DIMM when they keep coming) or uncorrected "
        "(UE, critical).",
        post=_edac_post,
    ),
)
