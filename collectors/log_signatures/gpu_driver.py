"""The NVIDIA driver: Xids (NVIDIA's Xid catalog), nvidia-smi's errors, NVRM, NVML and DCGM."""

from __future__ import annotations

import re
from collections.abc import Mapping

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

# Xid meanings (NVIDIA "Xid catalog"; research/seeds.md §4). category + whether the Xid points at
# the hardware of the host that logged it (then the host is blamed) or is usually application-made.
_ECC_XIDS = {48, 63, 64, 92, 94, 95}
_NVLINK_XIDS = {74, 144, 145, 146, 147, 148, 149, 150}


XID_MEANINGS: Mapping[int, str] = {
    13: "graphics engine exception (usually an application bug)",
    31: "GPU memory page fault (usually an application bug)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (usually an application fault)",
    45: "preemptive cleanup after a previous error (collateral)",
    48: "double-bit ECC error (DBE)",
    56: "display engine error",
    57: "error programming video memory interface",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failure",
    68: "NVDEC0 exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    123: "SPI PMU RPC failure",
    136: "link training failure",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW_CTRL error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed",
}


# Usually caused by the application (or collateral of another error): no host blame on their own.
_APP_XIDS = {13, 31, 43, 45, 68, 69, 109}
_INFO_XIDS = {45, 63}  # collateral / successful remap: worth a line, not an alarm by itself
_APP_FAULT_XIDS = {31, 43}  # the application's own fault on the GPU: a crash finding, not a host one


def _xid_post(ev: Event) -> None:
    root = ev.fields.get("root_xid")
    if root is not None:  # "45, ... caused by previous Xid 149": the earlier Xid is the cause
        ev.fields["reported_xid"] = ev.xid
        ev.xid = int(root)
    xid = ev.xid
    if xid is None:
        return
    ev.fields["xid_meaning"] = XID_MEANINGS.get(xid, "see NVIDIA's Xid catalog")
    if xid in _ECC_XIDS:
        ev.category = C.ECC
    elif xid in _NVLINK_XIDS:
        ev.category = C.NVLINK
    elif xid == 79:
        ev.category = C.GPU_LOST
    if xid == 154:
        m = re.search(r"to 0x[0-9a-f]+ \(([^)]+)\)", ev.message)
        if m:
            ev.fields["recovery_action"] = m.group(1)
            if m.group(1).strip().lower() == "none":
                ev.severity = S.INFO
    if xid in _APP_XIDS:
        ev.blame = Blame.NONE
        ev.severity = S.INFO if xid in _INFO_XIDS else S.WARNING
        if xid in _APP_FAULT_XIDS:
            # NVIDIA's Xid catalog: 31 (GPU memory page fault: an illegal address) and 43 (GPU stopped
            # processing: a user application fault) are the program's own fault on the GPU, i.e. a
            # crash of the process, not evidence about the host's hardware. 13 stays a (warning) Xid:
            # its causes include hardware, and the shared corpus labels it so (hw-02).
            ev.kind, ev.category = K.CRASH, C.CUDA_ERROR
    elif xid in _INFO_XIDS:
        ev.severity = S.WARNING


# An SXid's address is its NVSwitch's, not a GPU's: kept in its own field (the gpu_pci column is a GPU's)
SWITCH_PCI = PCI.replace("(?P<gpu_pci>", "(?P<switch_pci>")


def _sxid_post(ev: Event) -> None:
    if ev.fields.get("switch_pci"):
        ev.fields["switch_pci"] = ev.fields["switch_pci"].lower()
    sev = (ev.fields.get("sxid_severity") or ev.fields.get("fm_severity") or "").lower()
    if sev == "non-fatal":
        ev.severity = S.WARNING
    elif sev == "correctable":
        ev.severity = S.INFO
    elif sev == "data":  # the severity line, if the excerpt has it, speaks for the SXid
        ev.severity, ev.generic = S.WARNING, True


def _nvml_error_post(ev: Event) -> None:
    if ev.fields.get("nvml_class") in ("GpuIsLost", "ResetRequired") or ev.message.startswith("No devices"):
        ev.category = C.GPU_LOST


# kernel: Xid, ECC, lost GPU, PCIe, thermal
XIDS: tuple[Signature, ...] = (
    sig(
        "nvrm_xid",
        # The address may be redacted in a paste ("(PCI:...)"): the Xid code still stands.
        rf"NVRM: Xid \((?:{PCI}|[^()\n]{{0,40}})\): (?P<xid>\d+)(?:,[^\n]*?caused by previous Xid (?P<root_xid>\d+))?",
        K.FAULTY_HOST,
        C.XID,
        S.CRITICAL,
        Blame.SELF,
        ["NVRM: Xid"],
        "Driver Xid with the GPU's PCI address; hardware Xids blame the host that logged them, application "
        "Xids (13, 31, 43, 45, 109) do not; 'caused by previous Xid N' takes N as the cause.",
        post=_xid_post,
    ),
    sig(
        "nvrm_fallen_off_bus",
        # Also the driver's status NV_ERR_GPU_IS_LOST (open-gpu-kernel-modules nvstatuscodes.h:
        # NV_STATUS_CODE(NV_ERR_GPU_IS_LOST, 0x0000000F, "GPU lost from the bus")) as its assertions print
        # it: "NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST]
        # (0x0000000F) returned from ..." / "nvCheckOkFailedNoLog: Check failed: ...".
        rf"(?:NVRM: (?:The NVIDIA GPU {PCI}[^\n]*?)?)?fallen off the bus"
        r"|(?:Assertion|Check) failed: GPU lost from the bus \[NV_ERR_GPU_IS_LOST\]",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["fallen off the bus", "nv_err_gpu_is_lost"],
        "GPU lost (Xid 79 text, or the r570 multi-line 'The NVIDIA GPU <pci> ... has fallen off the bus' "
        "without an Xid token; the PCI address is taken from the header line above).",
    ),
    sig(
        "nvrm_reset_required",
        # NVIDIA/open-gpu-kernel-modules src/nvidia/src/libraries/utils/nvassert.c: "Check failed: %s
        # (0x%08X) returned from ..." (nvCheckOkFailedNoLog / nvAssertOkFailedNoLog), the status named
        # by nvstatuscodes.h: NV_ERR_RESET_REQUIRED (0x62, "Reset required"), NV_ERR_GPU_IN_FULLCHIP_RESET
        # (0x10, "GPU currently in full-chip reset"). The GPU answers nothing until it is reset.
        r"(?:Assertion|Check) failed: (?:Reset required \[NV_ERR_RESET_REQUIRED\]"
        r"|GPU currently in full-chip reset \[NV_ERR_GPU_IN_FULLCHIP_RESET\])",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["nv_err_reset_required", "nv_err_gpu_in_fullchip_reset"],
        "The NVIDIA driver returned 'reset required' / 'in full-chip reset': the GPU is unusable until reset.",
    ),
    sig(
        "ecc_uncorrectable",
        # nvidia-smi -q's "Retired Pages" section prints "Double Bit ECC : <n>" on every pre-A100 GPU, healthy
        # ones with 0 (N/A where retirement is unsupported): a count of 0 is no error
        r"(?:uncorrectable ECC error|Double Bit ECC(?!\s*:\s*(?:0|N/A)\s*$)|DBE \(Double Bit Error\)"
        r"|Row Remapping Failure|uncorrectable (?:memory|DRAM) error)",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["ECC", "Row Remapping Failure", "uncorrectable"],
        "Uncorrectable GPU memory error outside an Xid line.",
        flags=re.I,
    ),
    sig(
        "pcie_link_limited",
        r"(?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): (?P<bandwidth>[\d.]+ Gb/s) available PCIe bandwidth, "
        r"limited by (?P<limited_by>[\d.]+ GT/s PCIe x\d+) link",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.WARNING,
        Blame.SELF,
        ["available PCIe bandwidth"],
        "Kernel: a PCIe link trained below its capability.",
    ),
    sig(
        "cpu_thermal_throttle",
        r"(?:Core|Package) temperature above threshold, cpu clock throttled",
        K.FAULTY_HOST,
        C.THERMAL,
        S.WARNING,
        Blame.SELF,
        ["temperature above threshold"],
        "Kernel: CPU thermal throttling on this host.",
    ),
)


def _amd_reason_post(ev: Event) -> None:
    """ROCm's reason decides what failed: an ECC failure is the GPU's memory (a faulty host); a memory access
    fault otherwise is the process's, named by its reason as a CUDA error is by its string."""
    reason = ev.fields.get("hw_reason") or ""
    if "ecc" in reason.lower():
        ev.kind, ev.category, ev.severity = K.FAULTY_HOST, C.ECC, S.CRITICAL
    elif ev.kind == K.CRASH:
        ev.fields["cuda_error"] = f"GPU memory access fault: {reason}"


def _amd_page_fault_post(ev: Event) -> None:
    ev.fields["cuda_error"] = f"GPU page fault ({ev.fields.get('gpu_hub')})"


def _slowdown_post(ev: Event) -> None:
    """A power brake or a plain HW slowdown is power, the thermal ones thermal. The plain "HW Slowdown" is the sum of
    the others (nvidia-smi(1): "engaged due to high temperature, power brake assertion, or high power draw"): generic,
    so that where the block also says which one is active (R450+), that line is the finding, not a second one."""
    slowdown = str(ev.fields.get("slowdown", ""))
    if "Thermal" not in slowdown:
        ev.category = C.POWER
    if slowdown == "HW Slowdown":
        ev.generic = True


def _board_fault_post(ev: Event) -> None:
    """The power cables are power; a corrupted infoROM is a board fault (a warning: the GPU may still run)."""
    if "power cables" in ev.message:
        ev.category = C.POWER
    else:
        ev.severity = S.WARNING


# nvidia-smi (the driver's CLI)
NVIDIA_SMI: tuple[Signature, ...] = (
    sig(
        "nvidia_smi_no_driver",
        # nvidia-smi's message when NVML cannot reach the kernel driver (NVIDIA driver README, "nvidia-smi").
        r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["NVIDIA-SMI has failed"],
        "The driver does not answer on this host (crashed driver, GPU off the bus, module not loaded).",
    ),
    sig(
        "nvidia_smi_err_field",
        # nvidia-smi's table prints "ERR!" in a field NVML could not read for that GPU (nvidia-smi(1)).
        r"^\|[^\n]*?\bERR!",
        K.FAULTY_HOST,
        None,
        S.WARNING,
        Blame.NONE,
        ["err!"],
        "nvidia-smi could not read a GPU field (ERR!): a GPU in trouble or a transient NVML failure; look again.",
    ),
    sig(
        "nvidia_smi_uncorrectable_ecc",
        # nvidia-smi's default table: each GPU's first row is "| GPU  Name  Persistence-M | Bus-Id  Disp.A
        # | Volatile Uncorr. ECC |" (the header above it names the columns). A count above 0 in the third
        # field is uncorrectable ECC errors since the driver loaded on that GPU (nvidia-smi(1), ECC).
        r"^\|\s+(?P<gpu>\d+)\s+[^|\n]*?\s(?:On|Off)\s+\|\s+(?P<gpu_pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)"
        r"\s+(?:On|Off)\s+\|\s+(?P<uncorrected>[1-9]\d*)\s+\|\s*$",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["off |", "on |"],  # the Disp.A field before it: the pattern runs on those rows only, not every "|"
        "nvidia-smi's table with a non-zero 'Volatile Uncorr. ECC' count for a GPU.",
    ),
    sig(
        "nvidia_smi_remap_pending",
        # nvidia-smi -q: "Remapped Rows" (A100+) and "Retired Pages" (older) sections print
        # "Pending : Yes" when a row remap / page retirement waits for a GPU reset, and
        # "Remapping Failure Occurred : Yes" when the GPU ran out of spare rows (NVIDIA's memory error
        # management guide: reset the GPU; a remapping failure means replace it).
        # ("Pending Page Blacklist : Yes" in "Retired Pages": a retirement waiting for the reset)
        r"^\s*(?P<smi_field>Pending(?: Page Blacklist)?|Remapping Failure Occurred)\s*:\s*Yes\s*$",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["Pending", "Remapping Failure Occurred"],
        "nvidia-smi: a GPU memory row remap or page retirement is pending (reset the GPU) or failed (replace it).",
    ),
    sig(
        "nvidia_smi_fabric_status",
        # nvidia-smi -q's "Fabric" section (NVSwitch and multi-node NVLink systems) prints nvmlDeviceGetGpuFabricInfo's
        # nvmlGpuFabricInfo_t (nvml.h, NVML_GPU_FABRIC_STATE_*): "State : Not Supported | Not Started | In Progress |
        # Completed", then "Status : <nvmlErrorString(status)>", which nvml.h says is to be read only once the state
        # is Completed. A status other than "Success" there ("Insufficient Resources", "Unknown Error", ...) is a GPU
        # that failed to register with the NVLink fabric (fabric manager, NVSwitch): CUDA on it will not start
        # ("system not yet initialized"). "Status" is read only under a "Fabric" header whose state is Completed
        # (collectors/logs._fabric_from_header).
        r"^\s*Status\s*:\s*(?P<fabric_status>(?!Success\s*$|N/A\s*$)[A-Z][A-Za-z ]{2,60}?)\s*$",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        ["Status"],
        "nvidia-smi -q: the GPU's NVLink fabric registration completed with an error (fabric manager / NVSwitch).",
    ),
    sig(
        "rocr_hw_exception",
        # ROCm's runtime (ROCR-Runtime src/core/runtime/runtime.cpp HwExceptionHandler): fprintf(stderr, "HW Exception by
        # GPU node-%u (Agent handle: %p) reason :%s\n"), the reason "GPU Hang" (the driver found the GPU hung and reset
        # it) or an ECC failure; the process aborts after it. The GPU of this host failed under the job (a kernel
        # that never ends can hang it too: a fault of this host's GPU, not proof of its hardware).
        r"HW Exception by GPU node-(?P<gpu_node>\d+)(?: \(Agent handle: \S+\))? reason ?: ?(?P<hw_reason>[^\n]{1,60})",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["HW Exception by GPU"],
        "ROCm: the runtime reports a hardware exception of an AMD GPU (a GPU hang the driver reset, or ECC).",
        post=_amd_reason_post,
    ),
    sig(
        "rocr_memory_access_fault",
        # ROCR-Runtime src/core/runtime/runtime.cpp VMFaultHandler: fprintf(stderr, "Memory access fault by GPU
        # node-%u (Agent handle: %p) on address %p%s. Reason: %s.\n") (older: without the handle), then abort(). The
        # reasons: "Page not present or supervisor privilege", "Write access to a read-only page", "Execute access to
        # a page marked NX", "Host access only" (a kernel's bad address: CUDA's illegal memory access on an AMD GPU),
        # or "DRAM ECC failure", "SRAM ECC failure", "ECC failure (if supported by HW)" (the GPU's memory failed).
        r"Memory access fault by GPU node-(?P<gpu_node>\d+)(?: \(Agent handle: \S+\))? on address \S+?"
        r"(?:\(may not be exact address\))?\. Reason: (?P<hw_reason>[^\n]{1,80}?)\.?$",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["Memory access fault by GPU"],
        "ROCm: an AMD GPU faulted on a memory access of this process (a bad address, or an ECC failure).",
        post=_amd_reason_post,
    ),
    sig(
        "amdgpu_ring_timeout",
        # Linux drivers/gpu/drm/amd/amdgpu/amdgpu_job.c amdgpu_job_timedout: "ring %s timeout, signaled seq=%u, emitted
        # seq=%u" (DRM_ERROR, "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ..."; dev_err since 6.11), before it resets
        # the GPU; amdgpu_device.c amdgpu_device_gpu_recover: dev_info "GPU reset begin!". A job on this host's GPU
        # stopped completing and the driver reset the GPU ("ring %s timeout, but soft recovered" is not matched: the
        # driver recovered without a reset).
        r"ring (?P<ring>\S+) timeout, signaled seq=\d+, emitted seq=\d+|amdgpu: GPU reset begin!",
        K.FAULTY_HOST,
        None,
        S.WARNING,
        Blame.SELF,
        ["timeout, signaled seq", "gpu reset begin"],
        "amdgpu: a GPU job timed out on this host and the driver resets the GPU.",
    ),
    sig(
        "amdgpu_page_fault",
        # Linux drivers/gpu/drm/amd/amdgpu/gmc_v9_0.c (v10, v11 alike) gmc_v9_0_process_interrupt: dev_err "[%s] %s page
        # fault (src_id:%u ring:%u vmid:%u pasid:%u)" with the hub ("gfxhub", "mmhub") and "retry"/"no-retry", then
        # the process ("for process %s pid %d thread %s pid %d"): a GPU page fault of that process (its bad address,
        # as NVIDIA's Xid 31 MMU fault), not the hardware.
        r"\[(?P<gpu_hub>gfxhub|mmhub|vmc|gfx)\d*\] (?:(?:retry|no-retry) )?page fault \(src_id:",
        K.CRASH,
        C.CUDA_ERROR,
        S.WARNING,
        Blame.NONE,
        ["page fault (src_id"],
        "amdgpu: a process's GPU memory access faulted (a bad address in its kernel, as Xid 31).",
        post=_amd_page_fault_post,
    ),
    sig(
        "amdgpu_ras_error",
        # Linux drivers/gpu/drm/amd/amdgpu: amdgpu_ras.c "uncorrectable hardware error(%s) detected!" and amdgpu_aca.c
        # HW_ERR "Accelerator Check Architecture events logged", each prefixed by the device ("amdgpu 0000:1c:00.0:").
        # The per-block counts (amdgpu_ras.c amdgpu_ras_error_print_error_data: "%ld uncorrectable hardware errors
        # detected in %s block"; the RAS core's "{%llu} socket: %d, die: %d, %u new uncorrectable hardware errors
        # detected in %s block") count above zero; "no uncorrectable ..." is the all-clear of a query.
        rf"amdgpu {PCI}: (?:\{{\d+\}})?(?:uncorrectable hardware error|\[Hardware Error\]: Accelerator Check Architecture "
        r"events logged)"
        r"|(?<![\d.])[1-9]\d* (?:new )?uncorrectable hardware errors detected in (?:total in )?(?P<ras_block>\w+) block",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["uncorrectable hardware error", "accelerator check architecture"],
        "An AMD GPU reported an uncorrectable RAS error on this host.",
    ),
    sig(
        "nvidia_smi_device_handle",
        # nvidia-smi when nvmlDeviceGetHandleByIndex fails: "Unable to determine the device handle for GPU<bus id>:
        # <nvmlErrorString>", e.g. "Unknown Error" or "GPU is lost" (NVML_ERROR_GPU_IS_LOST); pasted as "for gpu" too.
        rf"Unable to determine the device handle for (?i:gpu)\s?{PCI}[^:]*:\s*(?P<nvml_error>[^\n]{{1,80}})",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["device handle for GPU"],
        "nvidia-smi cannot reach one GPU: it fell off the bus or is otherwise lost.",
    ),
    sig(
        "nvidia_smi_q_uncorrectable",
        # nvidia-smi -q, "ECC Errors" (R525+: "SRAM Uncorrectable", "DRAM Uncorrectable", R550+ also "SRAM Uncorrectable
        # Parity" / "SRAM Uncorrectable SEC-DED", under Volatile and Aggregate) and "Remapped Rows" ("Uncorrectable
        # Error : N", rows remapped after uncorrectable errors): a count above 0 is uncorrectable memory errors on this
        # GPU (nvidia-smi(1); NVIDIA's GPU memory error management guide). Which section (since the driver loaded, or
        # the board's lifetime) is not on the line: a warning.
        r"^\s*(?P<ecc_memory>SRAM|DRAM) Uncorrectable(?: Parity| SEC-DED)?\s*:\s*(?P<uncorrected>[1-9]\d*)\s*$"
        r"|^\s*Uncorrectable Error\s*:\s*(?P<uncorrected__2>[1-9]\d*)\s*$",
        K.FAULTY_HOST,
        C.ECC,
        S.WARNING,
        Blame.SELF,
        ["uncorrectable"],
        "nvidia-smi -q counts uncorrectable memory errors (or rows remapped after them) on a GPU.",
    ),
    sig(
        "nvidia_smi_q_double_bit",
        # nvidia-smi -q before R525, "ECC Errors": under Volatile and Aggregate, a "Single Bit" and a "Double Bit"
        # block, each counting per memory (Device Memory, Register File, L1 Cache, L2 Cache, Texture Memory, Texture
        # Shared, CBU) and then "Total : N". A double-bit error is uncorrectable: a Total above 0 under "Double Bit"
        # is this GPU's uncorrectable memory errors (nvidia-smi(1)); the line is the block's only where a "Double
        # Bit" header is the last such header a few lines above (collectors/logs._double_bit_from_header).
        r"^\s*Total\s*:\s*(?P<uncorrected>[1-9]\d*)\s*$",
        K.FAULTY_HOST,
        C.ECC,
        S.WARNING,
        Blame.SELF,
        ["total"],
        "nvidia-smi -q (before R525) counts double-bit (uncorrectable) ECC errors on a GPU.",
    ),
    sig(
        "nvidia_smi_q_hw_slowdown",
        # nvidia-smi -q, "Clocks Throttle Reasons" (R530+: "Clocks Event Reasons"): "HW Slowdown : Active" is the
        # hardware cutting the core clock by half or more (too hot, an external power brake, power draw too high);
        # "HW Thermal Slowdown" and "HW Power Brake Slowdown" say which; "SW Thermal Slowdown" is the driver's own
        # thermal cap (nvidia-smi(1), "Clocks Throttle Reasons"). Not the software power cap, which a GPU at full
        # load hits in normal work.
        r"^\s*(?P<slowdown>HW Slowdown|HW Thermal Slowdown|HW Power Brake Slowdown|SW Thermal Slowdown)\s*:\s*Active\s*$",
        K.FAULTY_HOST,
        C.THERMAL,
        S.WARNING,
        Blame.SELF,
        ["slowdown"],
        "nvidia-smi -q: the GPU's clocks are cut by a hardware (or thermal) slowdown.",
        post=_slowdown_post,
    ),
    sig(
        "nvidia_gpu_board_fault",
        # The driver's and nvidia-smi's words for a board that cannot run: NVRM "GPU %04x:%02x:%02x.%x: GPU does not have
        # the necessary power cables connected." (the auxiliary power not connected, or a failing PSU rail), and
        # nvidia-smi's "WARNING: infoROM is corrupted at gpu %s" (the board's configuration ROM: ECC and clocks settings
        # unreliable; NVIDIA support asks to reflash or replace).
        r"GPU does not have the necessary power cables connected|infoROM is corrupted at gpu (?P<gpu_pci>\S+)",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["power cables connected", "inforom is corrupted"],
        "The GPU board itself: its power cables are not connected, or its infoROM is corrupted.",
        post=_board_fault_post,
    ),
)


def _nvrx_check_post(ev: Event) -> None:
    """A failed NIC link check is the host's own network ports (faulty_host / ib); the node named is the host."""
    if ev.fields.pop("check", None) == "NIC link state":
        ev.category = C.IB
    named_self_post(ev)


def _dcgm_clocks_post(ev: Event) -> None:
    if ev.fields.pop("clocks_cause", None) == "power":
        ev.category = C.POWER


# the NVIDIA driver, NVML and DCGM beyond Xids (NVIDIA/open-gpu-kernel-modules 595.45.04 / 535.98,
# NVIDIA/go-nvml gen/nvml/nvml.h, NVIDIA/DCGM dcgmi/Diag.cpp v3.3.9 / v4.6.0)
DRIVER: tuple[Signature, ...] = (
    sig(
        "nvrm_gsp_banner",
        # src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c: NV_PRINTF(LEVEL_ERROR, "**** GSP Timeout ****") before an
        # Xid 119 (595.x; 535.x "GSP Failure"), NV_PRINTF's prefix (diagnostics/nvlog_printf.c RmMsgPrefix: "NVRM: "
        # then, as configured, "GPU%u", file, line, function: "NVRM: GPU1 _kgspLogRpcDebugInfo: ").
        # The GPU System Processor of this host's GPU stopped answering the driver.
        r"NVRM: [\w. ]{1,80}?: \*{10,} GSP (?P<gsp_event>Timeout|Failure|Error) \*{10,}",
        K.FAULTY_HOST,
        C.XID,
        S.CRITICAL,
        Blame.SELF,
        ["GSP Timeout", "GSP Failure", "GSP Error"],
        "The GPU's GSP firmware stopped answering the driver (the banner before Xid 119/120) on this host.",
    ),
    sig(
        "nvrm_crash_dump",
        # src/nvidia/arch/nvalloc/unix/src/osapi.c: "NVRM: A GPU crash dump has been created. If possible, please
        # run" after the driver saved a GPU's crash data; the Xid line before it says which fault.
        r"NVRM: A GPU crash dump has been created",
        K.FAULTY_HOST,
        C.XID,
        S.WARNING,
        Blame.SELF,
        ["GPU crash dump has been created"],
        "The driver saved crash data of a GPU of this host (which fault: the Xid line before it).",
        generic=True,
    ),
    sig(
        "nvswitch_sxid",
        # src/common/nvswitch/kernel/inc/common_nvswitch.h NVSWITCH_PRINT_SXID: "nvidia-%s: SXid (PCI:%s): %05d, "
        # then error_nvswitch.h's "Fatal, Link %02d ...", "Non-fatal, Link %02d ...", "Correctable, Link %02d ...".
        # The NVSwitch sits on this host's baseboard.
        # Each SXid is followed by its data line, "... SXid (PCI:%s): %05d, Data {0x%08x, ...}" (the severity is on
        # the line before): read alone, an SXid of unknown severity.
        rf"nvidia-nvswitch\d+: SXid \({SWITCH_PCI}\): (?P<sxid>\d+), (?P<sxid_severity>Fatal|Non-fatal|Correctable|Data)",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        ["SXid ("],
        "An NVSwitch of this host reported an error (SXid): Fatal critical, Non-fatal warning, Correctable information.",
        post=_sxid_post,
    ),
    sig(
        "fabricmanager_nvswitch_error",
        # NVIDIA Fabric Manager's log (/var/log/fabricmanager.log, nv-fabricmanager; closed source, the format as
        # leptonai/gpud's fabric-manager log component records it): "[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected
        # NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 33", and
        # "... detected NVSwitch non-fatal error 12028 ...": the same SXids the driver prints (nvswitch_sxid), seen by
        # the fabric manager. The NVSwitch sits on this host's baseboard.
        rf"detected NVSwitch (?P<fm_severity>fatal|non-fatal) error (?P<sxid>\d+) on fid \d+ on NVSwitch pci bus id (?:[0-9a-fA-F]{{4}})?{SWITCH_PCI}",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        ["detected NVSwitch"],
        "NVIDIA Fabric Manager saw an NVSwitch error (SXid) on this host: fatal critical, non-fatal warning.",
        post=_sxid_post,
    ),
    sig(
        "nvidia_peermem_error",
        # kernel-open/nvidia-peermem/nvidia-peermem.c nv_mem_client_init, peer_err(): "nvidia-peermem %s:%d ERROR
        # nv_mem_client_init -- error while registering traditional client" (or "nc client"): the IB stack
        # refused the peer-memory client, so GPUDirect RDMA is off on this host and NCCL stages through host
        # memory. (Its other ERROR lines, e.g. the free callback's "detected invalid context, skipping further
        # processing" when a process exits with registered memory, say nothing failed: not taken.)
        r"nvidia-peermem \w+:\d+ ERROR nv_mem_client_init -- error while registering (?:traditional|nc) client",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.NONE,
        ["error while registering"],
        "nvidia-peermem could not register with the IB stack: no GPUDirect RDMA on this host.",
    ),
    sig(
        "nvml_error",
        # nvidia-smi "Failed to initialize NVML: Driver/library version mismatch" and nvidia-ml-py's NVMLError_<Name>
        # classes (str: nvmlErrorString): NVML_ERROR_LIB_RM_VERSION_MISMATCH (the loaded kernel module is not the
        # installed library's: an upgrade without a reboot), NVML_ERROR_GPU_IS_LOST (off the bus),
        # NVML_ERROR_RESET_REQUIRED ("GPU requires restart"); nvidia-smi's "No devices were found" (the driver
        # answers and sees no GPU). Each is this host's GPU or driver.
        # The kernel module's side of the mismatch (src/nvidia/arch/nvalloc/unix/src/osapi.c): "NVRM: API mismatch: the
        # client has the version %s, but" (535.x), "NVRM: API mismatch: the client '%s' (pid %u)" (595.x).
        r"Failed to initialize NVML: Driver/library version mismatch|NVRM: API mismatch: the client"
        r"|NVMLError_(?P<nvml_class>LibRmVersionMismatch|GpuIsLost|ResetRequired)\b|^(?:nvidia-smi: )?No devices were found\s*$",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["Driver/library version mismatch", "API mismatch", "NVMLError_", "No devices were found"],
        "NVML: the host's driver and library differ, a GPU is lost or needs a reset, or no GPU is visible.",
        post=_nvml_error_post,
    ),
    sig(
        "dcgmi_diag_fail",
        # dcgmi/Diag.cpp: the DIAG_DATA row "| <name 25> | <info 45> |"; v3 prints "Fail - GPU: 0" / "Fail - GPUs:
        # 0, 3" / "Fail - All" beside the test, v4 one row per entity "GPU0: Fail" under it. A failed
        # diagnostic is NVIDIA's own test failing this host's GPU.
        r"^\|[^|\n]{0,40}\|\s*(?:Fail - (?:All|GPUs?: (?P<dcgm_gpus>\d+(?:, \d+)*))|GPU(?P<dcgm_gpu>\d+): Fail)\s*\|\s*$",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["Fail - ", ": Fail"],
        "dcgmi diag failed a test on a GPU of this host.",
    ),
    sig(
        "habanalabs_device_unusable",
        # Linux drivers/accel/habanalabs/common/device.c hl_device_init: dev_err(..., "Failed to initialize hl%d.
        # Device%s is NOT usable !") (Intel Gaudi), after "Failed to communicate with Device CPU (CPU-CP timeout)":
        # an accelerator of this host failed to come up.
        r"Failed to initialize hl(?P<hl_dev>\d+)\. Device\b[^\n]{0,20}? is NOT usable",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["is not usable"],
        "An Intel Gaudi device of this host failed to initialise (habanalabs driver).",
    ),
    sig(
        "nvvs_test_fail",
        # NVIDIA/DCGM nvvs/src/Output.cpp (779120f, the NVIDIA Validation Suite's console output, `nvvs` and
        # `dcgmi diag` before its table): prep() prints "\t\t<test>" then dots to a fixed width, Result() the
        # outcome ("PASS", "WARN", "SKIP", "FAIL") and each error as "\t\t   *** (GPU %u) <msg>" (older without
        # the GPU). A FAIL row is NVIDIA's own test failing this host's GPU ("Memory GPU6 ....... FAIL").
        r"^\s*(?P<nvvs_test>[A-Za-z][\w /-]{1,40}?)(?: GPU ?(?P<nvvs_gpu>\d+))? ?\.{5,} ?FAIL\b",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["... fail", "...fail"],
        "The NVIDIA Validation Suite (nvvs, dcgmi diag's text output) failed a test on a GPU of this host.",
    ),
    sig(
        "nvrm_fsp_failure",
        # NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/fsp/kern_fsp.c (Hopper and later): the driver's
        # commands to the GPU's FSP (its firmware security processor, which boots GSP) got no answer:
        # NV_PRINTF(LEVEL_ERROR, "FSP command timed out\n"), "FSP boot cmds failed. RM cannot boot.", "FSP secure
        # boot partition timed out." The GPU's firmware did not respond: this host's GPU.
        r"NVRM: \w+: (?P<fsp_error>FSP command timed out|FSP boot cmds failed|FSP secure boot partition timed out)",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["FSP command timed out", "FSP boot cmds failed", "FSP secure boot partition"],
        "The driver's commands to the GPU's firmware processor (FSP) went unanswered: the GPU does not boot.",
    ),
    sig(
        "xgboost_no_visible_gpu",
        # dmlc/xgboost src/learner.cc (1.x: "No visible GPU is found, setting `gpu_id` to -1"; 2.x src/context.cc:
        # "No visible GPU is found, setting device to CPU."): LOG(WARNING) when the process was asked for a GPU
        # and CUDA shows it none; training goes on on the CPU. Placement or visibility, not the GPU's fault.
        r"No visible GPU is found, setting (?:`?gpu_id`? to -1|device to CPU)",  # markdown may eat the backticks
        K.CRASH,
        C.CUDA_ERROR,
        S.WARNING,
        Blame.NONE,
        ["No visible GPU is found"],
        "XGBoost was asked for a GPU and saw none (CUDA_VISIBLE_DEVICES, placement): it fell back to the CPU.",
    ),
    sig(
        "amdgpu_mes_unresponsive",
        # Linux drivers/gpu/drm/amd/amdgpu/mes_v11_0.c (and v12) mes_submit_pkt_and_poll_completion: dev_err "MES
        # failed to respond to msg=%s"; amdgpu_mes.c "MES might be in unrecoverable state, issue a GPU reset": the
        # GPU's scheduler firmware (MES) stopped answering the driver, and the driver resets the GPU.
        rf"amdgpu {PCI}: (?:amdgpu: )?(?P<amdgpu_error>MES failed to respond to msg=\w+|MES might be in unrecoverable state)",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["mes failed to respond", "mes might be in unrecoverable"],
        "An AMD GPU's scheduler firmware (MES) stopped responding to the driver: the GPU is reset.",
    ),
    sig(
        "dcgmi_nvlink_link_down",
        # NVIDIA/DCGM dcgmi/Nvlink.cpp (dcgmi nvlink --link-status): per GPU, "    gpuId %d:" then one row of link
        # states, "U" up, "D" down, "X" disabled, "_" not supported ("Key: Up=U, Down=D, Disabled=X, Not
        # Supported=_"). A row with links down: this host's GPU lost NVLinks.
        r"^\s*(?=(?:[UDX_] )*D\b)(?P<link_states>(?:[UDX_] ){3,}[UDX_])\s*$",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        [" d "],
        "dcgmi nvlink --link-status shows NVLinks down (D) on a GPU of this host.",
    ),
    sig(
        "nvlink_error_counters",
        # nvidia-smi nvlink -e (--errorcounters; nvidia-smi(1), NVML nvmlDeviceGetNvLinkErrorCounter): per GPU
        # "GPU %d: <name> (UUID: ...)" then per link "Link %d: Replay Errors: %llu", "Link %d: Recovery Errors: %llu",
        # "Link %d: CRC Errors: %llu" (NVML_NVLINK_ERROR_DL_REPLAY / _DL_RECOVERY / _DL_CRC_FLIT; "CRC Flit"/"CRC Data"
        # on some drivers). Counted since the driver loaded. A CRC error corrupts a flit (then replayed); a recovery is
        # the link retrained: a marginal NVLink of this host. Replays alone are the correction working, not read.
        r"^\s*Link (?P<nvlink>\d+): (?P<nvlink_counter>Recovery|CRC(?: Flit| Data)?) Errors: (?P<count>[1-9]\d*)\s*$",
        K.FAULTY_HOST,
        C.NVLINK,
        S.WARNING,
        Blame.SELF,
        ["recovery errors:", "crc errors:", "crc flit errors:", "crc data errors:"],
        "nvidia-smi nvlink -e shows NVLink CRC or recovery errors on a GPU of this host (a marginal link).",
    ),
    sig(
        "nvrx_node_health_check_failed",
        # NVIDIA/nvidia-resiliency-ext (d8686d9) src/nvidia_resiliency_ext/fault_tolerance/ft_rendezvous_barrier.py
        # _run_health_check: log.error(f"{check_name} failed for node {self._this_node}: {failure_message}"), run by
        # ensure_node_is_healthy before the rendezvous admits the node: "GPU health check" ("Node {n} has an unhealthy
        # GPU."), "NIC link state health check" ("... has unhealthy NIC link(s)."), "Storage health check", "Storage
        # path health check", "Node health check" ("Node {n} is unhealthy."). The node is its _NodeDesc, printed
        # "{addr}_{pid}_{local_id}" (addr: socket.getfqdn()). The node checked itself and failed: that host.
        r"(?P<check>GPU|NIC link state|Storage|Storage path|Node) health check failed for node "
        r"(?P<self_node>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)_\d+_\d+\b",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["health check failed for node"],
        "NVRx's launcher found this node unhealthy (its GPU, NIC links, storage, or an external node check) and keeps"
        " it out of the rendezvous.",
        post=_nvrx_check_post,
    ),
    sig(
        "nvrx_gpu_recovery_action",
        # NVIDIA/nvidia-resiliency-ext (d8686d9) src/nvidia_resiliency_ext/shared_utils/health_check.py
        # GPUHealthCheck: NVML's recovery action for a GPU (nvmlDeviceGetFieldValues NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)
        # other than none, logged as "GPU {id}: Requires a reset to recover. ...", "... Requires a node reboot to
        # recover. ...", "... Requires peer-to-peer traffic to be drained. ...", "... Operating at reduced capacity.
        # ...". The driver says this host's GPU needs that action: the host that printed it.
        r"\bGPU (?P<gpu_index>\d{1,3}): (?:Requires (?:a reset|a node reboot) to recover|Requires peer-to-peer traffic"
        r" to be drained|Operating at reduced capacity)\.",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["to recover.", "to be drained.", "reduced capacity."],
        "NVML says a GPU of this host needs a reset, a reboot or a drain to recover (NVRx's GPU health check).",
    ),
    # DCGM's failure messages (NVIDIA/DCGM 4.6.0, 72fa3fe, dcgmlib/dcgm_errors.h DCGM_FR_*_MSG), which `dcgmi diag`,
    # `dcgmi health -c` (dcgmi/Health.cpp: the incident's error.msg under its system's row) and DCGM's logs print:
    # the hardware ones, each about "GPU %u" of the host DCGM runs on.
    sig(
        "dcgm_memory_fault",
        r"Detected \d+ volatile double-bit ECC error\(s\) in GPU (?P<gpu_index>\d+)"
        r"|A pending retired page has been detected in GPU (?P<gpu_index__2>\d+)"
        r"|\d+ or more retired pages have been detected in GPU (?P<gpu_index__3>\d+)"
        r"|An excess of \d+ retired pages due to DBEs have been detected"
        r"|GPU (?P<gpu_index__4>\d+) (?:had uncorrectable memory errors and (?:row remapping failed|\d+ rows were remapped)"
        r"|exceeded uncorrectable row remap limit|had memory errors and row remappings are pending)"
        r"|Pending page retirements together with a DBE were detected on GPU (?P<gpu_index__5>\d+)"
        r"|Found \d+ faulty memory elements on GPU (?P<gpu_index__6>\d+)"
        r"|GPU had an uncontained error \(XID 95\)",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["double-bit ecc", "retired page", "row remap", "faulty memory elements", "uncontained error"],
        "DCGM found uncorrectable memory errors, retired pages or failed row remapping on a GPU of this host.",
    ),
    sig(
        "dcgm_nvlink_fault",
        # DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD_MSG spells "occuring" so
        r"Detected \d+ .{1,60}? NvLink errors on GPU (?P<gpu_index>\d+)'s NVLink (?:which exceeds|\(should be 0\))"
        r"|GPU (?P<gpu_index__2>\d+)'s NvLink link \d+ is currently down"
        r"|[\d.]+ .{1,60}? NvLink errors found occurr?ing per second on GPU (?P<gpu_index__3>\d+)"
        r"|Detected (?:effective|symbol) BER \S+ exceeds minimum threshold on GPU (?P<gpu_index__4>\d+)'s NVLink"
        r"|Only \d+ NvLinks are up out of the expected \d+"
        r"|NvSwitch physical ID \d+'s NvLink port \d+ is currently down|Detected fatal errors on NvSwitch \d+ link \d+"
        r"|NVSwitch \d+'s NvLink \d+ is down|Detected fatal NvSwitch SXID \d+",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        ["nvlink errors", "nvlink link", "exceeds minimum threshold", "nvlinks are up", "nvswitch"],
        "DCGM found NVLink errors, a link down or a fatal NVSwitch error on this host.",
    ),
    sig(
        "dcgm_pcie_link_below_minimum",
        r"GPU (?P<gpu_index>\d+) is running at PCI link (?:generation \d+|width \d+X), which is below the minimum allowed",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.CRITICAL,
        Blame.SELF,
        ["is running at pci link"],
        "DCGM found a GPU's PCIe link trained below its minimum generation or width on this host.",
    ),
    sig(
        "dcgm_pcie_replays",
        # (dcgmi health's box wraps the message at its column: "for GPU N" may be on the next row)
        r"Detected more than \d+ PCIe replays per minute(?: for GPU (?P<gpu_index>\d+))?"
        r"|GPU (?P<gpu_index__2>\d+) host-side PCIe replay violation",
        K.FAULTY_HOST,
        None,
        S.WARNING,
        Blame.SELF,
        ["pcie replays per minute", "pcie replay violation"],
        "DCGM counted PCIe replays above its rate on a GPU of this host (a marginal link).",
    ),
    sig(
        "dcgm_clocks_event",
        r"Detected clocks event due to (?P<clocks_cause>thermal|power) violation in GPU (?P<gpu_index>\d+)"
        r"|There were thermal violations totaling [\d.]+ seconds for GPU (?P<gpu_index__2>\d+)",
        K.FAULTY_HOST,
        C.THERMAL,
        S.WARNING,
        Blame.SELF,
        ["clocks event due to", "thermal violations totaling"],
        "DCGM saw a GPU of this host slowed by its thermal or power limit.",
        post=_dcgm_clocks_post,
    ),
    sig(
        "dcgm_xid",
        # DCGM_FR_XID_ERROR_MSG "Detected XID %u for GPU %u": the driver's Xid as DCGM's health watch reports it, read
        # by the Xid table as the NVRM line is (application Xids do not blame the host)
        r"Detected XID (?P<xid>\d+) for GPU (?P<gpu_index>\d+)",
        K.FAULTY_HOST,
        C.XID,
        S.CRITICAL,
        Blame.SELF,
        ["detected xid"],
        "DCGM reported a driver Xid on a GPU of this host.",
        post=_xid_post,
    ),
    sig(
        "dcgm_gpu_recovery_action",
        r"GPU (?P<gpu_index>\d+) (?:requires a reset to recover from a fault|fault may have left the OS in an inconsistent"
        r" state|requires peer-to-peer traffic to be quiesced|operating at reduced capacity due to a fault)\. Recovery"
        r" action: \d+ \((?P<recovery_action>\w+)\)",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["recovery action:"],
        "DCGM says a GPU of this host needs a reset, a reboot or a drain to recover (NVML's recovery action).",
    ),
)
