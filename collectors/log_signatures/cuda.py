"""CUDA errors and out-of-memory, from the runtime, the allocator, the OOM killer, kubelet and Ray."""

from __future__ import annotations

from trainctl.collectors.log_signatures.rule import (
    SIZE,
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    named_self_post,
    sig,
)


def _eviction_post(ev: Event) -> None:
    if (ev.fields.get("resource") or "").lower().startswith("memory"):
        ev.kind, ev.category = K.OOM, None  # the node ran out of memory: an out-of-memory, by kubelet


def cuda_post(ev: Event) -> None:
    what = (ev.fields.get("cuda_error") or "").lower()
    if "ecc" in what:  # the app sees the DBE before dmesg is read: a hardware fault of this GPU
        ev.kind, ev.category, ev.severity = K.FAULTY_HOST, C.ECC, S.CRITICAL
    elif "uncorrectable nvlink" in what:  # CUDA_ERROR_NVLINK_UNCORRECTABLE (220): this GPU's NVLink failed
        ev.kind, ev.category, ev.severity = K.FAULTY_HOST, C.NVLINK, S.CRITICAL
    elif what.strip().startswith("out of memory"):  # cudaErrorMemoryAllocation (2): "out of memory"
        ev.kind, ev.category = K.OOM, None


def _oom_post(ev: Event) -> None:
    gpu = ev.fields.pop("gpu_legacy", None) or ev.fields.get("gpu")
    if gpu is not None:
        ev.fields["gpu"] = int(gpu)


def dataloader_post(ev: Event) -> None:
    if ev.fields.pop("shm_advice", None):  # printed for SIGBUS only (torch/csrc/DataLoader.cpp)
        ev.fields["signal_text"] = "Bus error"
    sig = (ev.fields.get("signal_text") or "").strip().lower()
    if not sig:  # the line was cut before the signal's name: what follows it says more
        ev.severity, ev.generic = S.WARNING, True
    if sig in ("killed", "bus error"):  # the OOM killer / a full /dev/shm: memory, not a bug
        ev.kind, ev.category = K.OOM, None


def _ray_node_post(ev: Event) -> None:
    """The node Ray names (its IP) is the host that ran out of memory, whoever printed the line."""
    ip = ev.fields.pop("node_ip", None)
    if ip:
        ev.host, ev.host_basis = ip, "text"


# CUDA errors, OOM
ERRORS: tuple[Signature, ...] = (
    sig(
        "cuda_oom",
        # ROCm builds print the same message hipified: "HIP out of memory. Tried to allocate ... GPU 0
        # has a total capacity of ..." (torch's hipify turns c10/cuda's CUDACachingAllocator.cpp into
        # c10/hip's, CUDA -> HIP in its strings; the advice names PYTORCH_HIP_ALLOC_CONF); Intel GPUs'
        # allocator the same words with XPU (c10/xpu/XPUCachingAllocator.cpp).
        # The message's head alone ("torch.OutOfMemoryError: CUDA out of memory.", a line cut where a log table or a
        # terminal wrapped it) is the same OOM: the allocator's message begins so, and nothing else prints it.
        rf"(?:CUDA|HIP|XPU) out of memory(?:\. Tried to allocate (?P<tried>{SIZE})(?:\s*\(GPU (?P<gpu_legacy>\d+); (?P<total>{SIZE}) total capacity)?"
        rf"(?:\. GPU (?P<gpu>\d+) has a total capac(?:i)?ty of (?P<total__2>{SIZE}))?|\.\s*$)",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["CUDA out of memory", "HIP out of memory", "XPU out of memory"],
        "CUDA (or ROCm's HIP, Intel's XPU) caching allocator OOM, every era (1.x '(GPU 0; X total capacity; ...)', 2.1 'capacty' typo, "
        "2.2+ 'Including non-PyTorch memory', 2.4+ 'private pools'). The process that printed it is the culprit.",
        post=_oom_post,
    ),
    sig(
        "allocator_limit_oom",
        # torch c10/cuda/CUDACachingAllocator.cpp: over the per-process memory fraction
        # (torch.cuda.set_per_process_memory_fraction), OutOfMemoryError "Allocation on device %d would
        # exceed allowed memory. (out of memory)\nCurrently allocated     : ..."; aten/src/ATen/mps/
        # MPSAllocator.mm: "MPS backend out of memory (MPS allocated: ..., max allowed: ...)".
        # (also c10/cuda/CUDAMallocAsyncAllocator.cpp, the cudaMallocAsync backend). The message may be cut after
        # "Allocation on device" where a fixed-width log table wraps it (Python rich's handler: the message column,
        # then "file.py:NNN"; ComfyUI's "!!! Exception during processing !!! Allocation on device   execution.py:430").
        r"Allocation on device (?P<gpu>\d+) would exceed allowed memory|MPS backend out of memory"
        r"|\bAllocation on device(?=\s{2,}|\s*$)",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["would exceed allowed memory", "MPS backend out of memory", "allocation on device"],
        "The allocator refused an allocation over the process's memory limit (a memory fraction, MPS's "
        "high watermark): an OOM of the process that printed it.",
    ),
    sig(
        "cuda_error_oom",
        # torch's "CUDA error: out of memory" (c10/cuda/CUDAException), "CUDA driver error: out of memory"
        # (c10/cuda/driver_api.h C10_CUDA_DRIVER_CHECK); the error names as the APIs spell them
        # (cuda.h CUDA_ERROR_OUT_OF_MEMORY, driver_types.h cudaErrorMemoryAllocation, HIP's
        # hipErrorOutOfMemory); cuBLAS/cuDNN's allocation failures (cublas_api.h CUBLAS_STATUS_ALLOC_FAILED:
        # "usually caused by a cudaMalloc() failure", cudnn CUDNN_STATUS_ALLOC_FAILED).
        r"CUDA (?:driver )?error: out of memory|\b(?:CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|hipErrorOutOfMemory"
        r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED)\b",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        [
            "out of memory",
            "cuda_error_out_of_memory",
            "cudaerrormemoryallocation",
            "hiperroroutofmemory",
            "_status_alloc_failed",
        ],  # fmt: skip
        "OOM raised as a CUDA error (outside the caching allocator, e.g. NCCL or cuBLAS workspace).",
    ),
    sig(
        "host_oom",
        # The process's host memory ran out: libstdc++'s terminate handler ("terminate called after throwing
        # an instance of 'std::bad_alloc'", what(): "std::bad_alloc"), Python's MemoryError (numpy
        # _ArrayMemoryError: "Unable to allocate %s for an array with shape %s and data type %s"), and
        # TensorFlow's ResourceExhaustedError "OOM when allocating tensor with shape[...]" (a GPU's BFC
        # allocator: device memory).
        r"\bstd::bad_alloc\b|^(?:[\w.]+\.)?MemoryError\b(?::|$)|Unable to allocate [\d.]+ [KMGTP]?i?B for an array"
        r"|OOM when allocating tensor",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["bad_alloc", "memoryerror", "unable to allocate", "oom when allocating"],
        "The process could not allocate memory (C++ bad_alloc, Python MemoryError, TensorFlow's allocator).",
    ),
    sig(
        "cpu_oom",
        # mm/oom_kill.c __oom_kill_process: "%s: Killed process %d (%s) ..." with "Out of memory" or, for a
        # cgroup's limit (Slurm, Kubernetes), "Memory cgroup out of memory". Before 4.19 two lines: oom_kill_process
        # pr_err("%s: Kill process %d (%s) score %u or sacrifice child"), then "Killed process %d (%s) total-vm:%lukB,
        # anon-rss:%lukB, ..." on its own.
        r"DefaultCPUAllocator: (?:can't|not enough memory)|[Oo]ut of memory: Killed process (?P<pid>\d+) \((?P<proc>[^)]+)\)|oom-kill:"
        r"|[Oo]ut of memory: Kill process (?P<pid__2>\d+) \((?P<proc__2>[^)\n]+)\) score \d+ or sacrifice child"
        r"|\bKilled process (?P<pid__3>\d+) \((?P<proc__3>[^)\n]+)\) total-vm:\d+kB",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["DefaultCPUAllocator", "Killed process", "oom-kill", "sacrifice child"],
        "Host memory exhausted (allocator or the kernel OOM killer on this host).",
    ),
    sig(
        "accelerate_batch_size_exhausted",
        # huggingface/accelerate src/accelerate/utils/memory.py find_executable_batch_size: halves the batch size on
        # every out-of-memory error and raises "No executable batch size found, reached zero." at the end.
        r"No executable batch size found, reached zero",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["No executable batch size found"],
        "accelerate halved the batch size after each OOM down to zero: the model does not fit at any batch size.",
    ),
    sig(
        "ray_memory_monitor_kill",
        # ray src/ray/raylet/node_manager.cc (memory monitor): "N Workers (tasks / actors) killed due to
        # memory pressure (OOM), M Workers crashed due to other reasons at node (ID: ..., IP: a.b.c.d) ...". The node
        # it names is the one that ran out of host memory (as ray_node_low_memory's); the node ID is 56 hex digits.
        # (a wrap at "(tasks /" leaves "actors) killed ..." as a line of its own)
        r"(?:(?P<killed>\d+) Workers \(tasks / |^)actors\) killed due to memory pressure \(OOM\)"
        r"(?:.{0,200}?IP: (?P<node_ip>[\d.]+))?",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["killed due to memory pressure"],
        "Ray's memory monitor killed workers on a node that ran out of host memory; names the node's IP.",
        post=_ray_node_post,
    ),
    sig(
        "ray_task_oom",
        # ray python/ray/exceptions.py RayTaskError.as_instanceof_cause: the task's exception re-raised as a class
        # named f"RayTaskError({cause_cls.__name__})", printed "ray.exceptions.RayTaskError(OutOfMemoryError):
        # ray::TrainWorker.train() (pid=N, ip=a.b.c.d, ...)" (RayTaskError.__str__: the proctitle, pid and ip of the
        # worker that raised it). OutOfMemoryError is torch's CUDA OOM or Ray's own node OOM, MemoryError the
        # host's: an out-of-memory on the worker at that IP. Read where a paste keeps the re-raise, not the cause.
        r"RayTaskError\((?:OutOfMemoryError|MemoryError)\)(?:[^\n]*?\(pid=\d+, ip=(?P<node_ip>[\d.]+))?",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["RayTaskError("],
        "A Ray task raised an out-of-memory error on the worker at the IP Ray names.",
        post=_ray_node_post,
    ),
    sig(
        "ray_worker_exit_k8s_memory",
        # ray python/ray/_raylet.pyx (task_execution_handler): a worker that exits on SystemExit (a SIGTERM)
        # reports "Worker exits with an exit code {code}." and, under Kubernetes, adds " The worker may have exceeded
        # K8s pod memory limits." ("In K8s, SIGTERM likely means we hit memory limits", its comment). Ray's own
        # guess, said as a guess: an out-of-memory lead, generic (a failure printed beside it speaks first).
        r"The worker may have exceeded K8s pod memory limits",
        K.OOM,
        None,
        S.WARNING,
        Blame.NONE,
        ["exceeded K8s pod memory"],
        "Ray: a worker exited on SIGTERM under Kubernetes, which Ray reads as the pod's memory limit.",
        generic=True,
    ),
    sig(
        "ray_node_low_memory",
        # ray src/ray/raylet/node_manager.cc (the memory monitor's worker exit detail), raised to the
        # caller as ray.exceptions.OutOfMemoryError: "Task was killed due to the node running low on
        # memory." (2.2-2.54), "N worker(s) were killed due to the node running low on memory." (2.55+),
        # followed by "Memory on the node (IP: a.b.c.d, ID: ...) ... was U / T (f), which exceeds the
        # memory usage threshold of x". The node it names is the one that ran out of host memory. The same
        # message ends "Refer to the documentation on how to address the out of memory issue:
        # https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more
        # memory on this node ..." (a paste often keeps only that tail, under the top-memory process table).
        r"(?:Task was|\d+ worker\(s\) were) killed due to the node running low on memory"
        r"|Memory on the node \(IP: (?P<node_ip>[\d.]+)[,)][^\n]*?exceeds the memory usage threshold"
        r"|Refer to the documentation on how to address the out of memory issue: \S*ray-oom-prevention",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["running low on memory", "exceeds the memory usage threshold", "ray-oom-prevention"],
        "Ray's memory monitor killed a worker because its node's host memory crossed the threshold; "
        "names the node's IP.",
        post=_ray_node_post,
    ),
    sig(
        "ray_worker_died",
        # ray src/ray/raylet/node_manager.cc (a worker that exited with SYSTEM_ERROR while running a
        # task): "A worker died or was killed while executing a task by an unexpected system error. To
        # troubleshoot the problem, check the logs for the dead worker. RayTask ID: ... Worker ID: ...
        # Node ID: ... Worker IP address: a.b.c.d Worker port: N Worker PID: N Worker exit type: ...
        # Worker exit detail: ..." (newer: "Lease ID:" for "RayTask ID:"). The worker on that IP died.
        r"A worker died or was killed while executing a task by an unexpected system error"
        r"(?:[^\n]*?Worker IP address: (?P<node_ip>[\d.]+))?",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["a worker died or was killed"],
        "Ray's raylet: a worker process died while running a task (SIGKILL by the OOM killer, a crash, "
        "ray stop); names the worker's node IP.",
        post=_ray_node_post,
    ),
    sig(
        "ray_actor_died",
        # ray python/ray/exceptions.py ActorDiedError.BASE_ERROR_MSG "The actor died unexpectedly before
        # finishing this task." (RayActorError before 2.x), followed by its context as tab-indented
        # "class_name:", "actor_id:", "pid:", "name:", "namespace:", "ip:" lines (parse_records takes
        # the ip: the node the dead actor ran on).
        r"(?:ActorDiedError|RayActorError): The actor died unexpectedly before finishing this task",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["The actor died unexpectedly"],
        "A Ray actor's worker process died (OOM killer, a crash, ray stop); its context names the node IP.",
    ),
    sig(
        "ray_node_dead",
        # ray src/ray/gcs/gcs_server/gcs_node_manager.cc (and the monitor before it) on a node whose raylet stopped
        # heartbeating: "The node with node id: %s and address: %s and node name: %s has been marked dead because
        # the detector has missed too many heartbeats from it. This can happen when a (1) raylet crashes
        # unexpectedly (OOM, preempted node, etc.) (2) raylet has lagging heartbeats ..." (1.x: "... node id: %s
        # and ip: %s ...", earlier "The node with node id %s has been marked dead ..."); drivers log it through
        # worker.py. The node named is gone or unreachable from the head (a crash, an OOM, a preemption, or lag).
        r"The node with node id:? [0-9a-f]{8,64}(?: and (?:ip|address): (?P<node_ip>[\w.:-]+))?(?: and node name: \S+)?"
        r" has been marked dead because the detector has missed too many heartbeats",
        K.CRASH,
        None,
        S.WARNING,
        Blame.SELF,
        ["has been marked dead"],
        "Ray's GCS: a node stopped heartbeating (its raylet crashed, was OOM-killed or preempted, or lags); names it.",
        post=_ray_node_post,
    ),
    sig(
        "kubelet_eviction",
        # kubernetes pkg/kubelet/eviction/helpers.go: nodeLowMessageFmt "The node was low on resource: %v.",
        # podEphemeralStorageMessageFmt "Pod ephemeral local storage usage exceeds the total limit of
        # containers %s.", containerEphemeralStorageMessageFmt "Container %s exceeded its local ephemeral
        # storage limit %q."; kubectl describe shows them as an `Evicted` event from kubelet.
        r"(?P<k8s_evicted>The node was low on resource: (?P<resource>[\w.-]+)|Pod ephemeral local storage usage "
        r"exceeds the total limit|Container \S+ exceeded its local ephemeral storage limit)",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["The node was low on resource", "ephemeral local storage", "local ephemeral storage"],
        "kubelet evicted the pod (a node resource ran out: memory is an OOM, disk or ephemeral storage ends it).",
        post=_eviction_post,
    ),
    sig(
        "oom_killer_invoked",
        # Linux mm/oom_kill.c dump_header: pr_warn("%s invoked oom-killer: gfp_mask=%#x(%pGg), order=%d,
        # oom_score_adj=%hd"), and the reaper's pr_info("oom_reaper: reaped process %d (%s), now anon-rss:...")
        # once the victim is gone: host memory ran out on this host.
        r"(?P<invoker>\S+) invoked oom-killer: gfp_mask=|oom_reaper: reaped process (?P<pid>\d+) \((?P<proc>[^)\n]+)\)",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["invoked oom-killer", "oom_reaper"],
        "The kernel's OOM killer ran on this host (host memory exhausted); the reaped process is named.",
    ),
    sig(
        "xla_resource_exhausted",
        # TensorFlow/XLA's allocator: "Resource exhausted: Out of memory while trying to allocate N bytes."
        # (ResourceExhaustedError; JAX: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate ...").
        r"(?:Resource exhausted|RESOURCE_EXHAUSTED): Out of memory while trying to allocate (?P<alloc_bytes>\d+) bytes",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["out of memory while trying to allocate"],
        "The accelerator's memory is exhausted in this process (TensorFlow/XLA/JAX allocators).",
    ),
    sig(
        "dataloader_worker_killed",
        # torch/csrc/DataLoader.cpp SIGCHLD handler: "DataLoader worker (pid %d) is killed by signal: %s. " with
        # strsignal(): "Killed" (SIGKILL: the kernel's OOM killer, in practice), "Bus error" (SIGBUS: /dev/shm full,
        # the message then says so), "Segmentation fault", ...
        # For SIGBUS it goes on "It is possible that dataloader's workers are out of shared memory. Please try to
        # raise your shared memory limit." (a paste may break the line after "signal: ", so each half is read).
        r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal(?:: (?P<signal_text>[A-Za-z][A-Za-z ]*))?"
        r"|(?P<shm_advice>It is possible that dataloader's workers are out of shared memory)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["is killed by signal", "workers are out of shared memory"],
        "A DataLoader worker died on a signal: SIGKILL (host memory: the OOM killer) and SIGBUS (shared memory "
        "exhausted) are out-of-memory; other signals a crash.",
        post=dataloader_post,
    ),
    sig(
        "cuda_check_return",
        # The CUDA_CHECK_RETURN idiom of CUDA extensions (bitsandbytes csrc/ops.cuh, many forks of the CUDA samples):
        # printf("Error %s at line %d in file %s\n", cudaGetErrorString(status), __LINE__, __FILE__).
        r"Error (?P<cuda_error>[^\n]{3,100}?) at line \d+ in file \S+\.(?:cu|cuh|cpp|cc)\b",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["at line"],
        "A CUDA call of a compiled extension failed in this process.",
    ),
    sig(
        "nccl_cuda_alloc_failed",
        # NCCL src/include/alloc.h: WARN("Failed to CUDA calloc %ld bytes"), "Failed to CUDA calloc async %ld
        # bytes", "Failed to CUDA malloc %ld bytes", "Failed to CUDA host alloc %ld bytes" (ncclCuda*Debug);
        # surfaces in torch as ncclUnhandledCudaError with this as its "Last error".
        # (and ncclCalloc/ncclRealloc of host memory: "Failed to malloc %ld bytes")
        r"Failed to (?:CUDA (?P<alloc>calloc(?: async)?|malloc|host alloc)|malloc) (?P<alloc_bytes>\d+) bytes",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["Failed to CUDA", "Failed to malloc"],
        "NCCL could not allocate its buffers: the GPU (or pinned host memory) is full in this process.",
    ),
    sig(
        "slurm_oom_kill",
        # slurmstepd (task/cgroup memory plugin) after the step: "Detected N oom-kill event(s) in StepId=J.S.
        # Some of your processes may have been killed by the cgroup out-of-memory handler." (older: "in step
        # J.S cgroup"); srun per task: "srun: error: NODE: task N: Out Of Memory".
        r"Detected (?P<oom_events>\d+) oom[-_]kill event|srun: error: (?P<self_node>[\w.-]+): tasks? [\d,-]+: Out Of Memory",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["oom-kill event", "oom_kill event", "Out Of Memory"],
        "Slurm's cgroup killed the step's processes for exceeding the job's memory limit (host RAM); srun "
        "names the node.",
        post=named_self_post,
    ),
    sig(
        "cuda_error",
        r"CUDA error: (?!out of memory)(?P<cuda_error>[^\n.]+)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["CUDA error:"],
        "Sticky CUDA error in this process (illegal address, launch failure, ...); 'uncorrectable ECC' is a "
        "faulty GPU.",
        post=cuda_post,
    ),
    sig(
        "cuda_runtime_error_string",
        # The CUDA runtime's own error strings (cudaGetErrorString, libcudart: the messages the CUDA Runtime API
        # reference gives for each cudaError_t) as any wrapper prints them: "CUDA Runtime Error(46): all
        # CUDA-capable devices are busy or unavailable", THC's "THCudaCheck FAIL file=... error=700 : an illegal
        # memory access was encountered", CNTK's "CUDA failure 77: ...", "Cuda failure: ...". Only strings that
        # name a CUDA failure and nothing else (700 illegal address, 719 launch failure, 716 misaligned address,
        # 715 illegal instruction, 710 device-side assert, 209 no kernel image, 46 devices busy, 100 no device,
        # 35 driver too old, 702 launch timeout, 701 too many resources, 98 invalid device function, 214 ECC,
        # 220 NVLink: cuGetErrorString's "uncorrectable NVLink error detected during the execution", where
        # the API reference's prose reads "an uncorrectable NVLink error was detected during the
        # execution"). Generic: torch's "CUDA error: <string>" on the same line is cuda_error's.
        r"(?P<cuda_error>an illegal memory access was encountered|unspecified launch failure|misaligned address"
        r"|an illegal instruction was encountered|device-side assert triggered"
        r"|no kernel image is available for execution on the device"
        r"|(?:all )?CUDA-capable device(?:\(s\) is/are|s are) busy or unavailable|no CUDA-capable device is detected"
        r"|CUDA driver version is insufficient for CUDA runtime version|the launch timed out and was terminated"
        r"|too many resources requested for launch|invalid device function|uncorrectable ECC error encountered"
        r"|(?:an )?uncorrectable NVLink error (?:was )?detected during the execution)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        [
            "illegal memory access",
            "unspecified launch failure",
            "misaligned address",
            "illegal instruction",
            "device-side assert",
            "no kernel image",
            "busy or unavailable",
            "no cuda-capable device",
            "driver version is insufficient",
            "launch timed out",
            "too many resources requested",
            "invalid device function",
            "uncorrectable ecc",
            "uncorrectable nvlink",
        ],
        "A CUDA runtime error string in a wrapper's line (the wrapper is not torch's 'CUDA error:').",
        generic=True,
        post=cuda_post,
    ),
    sig(
        "cuda_device_assert",
        # CUDA C++ Programming Guide, "Assertion": a failed device assert prints
        # "<file>:<line>: <function>: block: [x,y,z], thread: [x,y,z] Assertion `<cond>` failed." (backtick
        # both sides; glibc's host assert ends with an apostrophe), then the kernel's error is
        # "device-side assert triggered". ATen's kernels (Indexing.cu, ...) assert their index bounds.
        # (Backticks may be gone: markdown pastes lose them.) The kernel context (`thread: [..]` or the .cu
        # file) is required, so a host-side C assert is not taken for a GPU one.
        r"(?:thread: \[[\d,]+\]|\.cuh?:\d+\]?)[^\n]{0,200}?Assertion `?(?P<assert_cond>[^`'\n]{1,200}?)`? failed",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["assertion"],
        "A CUDA kernel's device-side assert failed in this process (an out-of-range index, a bad label).",
    ),
    sig(
        "cuda_runtime_error_legacy",
        r"cuda runtime error \((?P<cuda_errno>\d+)\) : (?P<cuda_error>[^\n]+?)(?: at |$)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["cuda runtime error"],
        "Legacy THC form, e.g. '(39) : uncorrectable ECC error encountered'.",
        post=cuda_post,
    ),
    sig(
        "thc_cuda_check_fail",
        # torch 0.x THC (THCGeneral.c __THCudaCheck): fprintf(stderr, "THCudaCheck FAIL file=%s line=%i
        # error=%i : %s\n", file, line, err, cudaGetErrorString(err)) before "cuda runtime error (%d) : %s".
        r"THCudaCheck FAIL file=\S+ line=\d+ error=(?P<cuda_errno>\d+) : (?P<cuda_error>[^\n]+)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["THCudaCheck FAIL"],
        "Legacy THC CUDA check failure (torch 0.x); out of memory is an OOM.",
        post=cuda_post,
    ),
    sig(
        "cublas_cudnn_error",
        r"(?P<cuda_error>CUBLAS_STATUS_(?!SUCCESS|ALLOC_FAILED)\w+|CUDNN_STATUS_(?!SUCCESS|ALLOC_FAILED)\w+"
        r"|CUDA driver error: (?!out of memory)[^\n]+)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["CUBLAS_STATUS_", "CUDNN_STATUS_", "CUDA driver error"],
        "cuBLAS/cuDNN/driver failure in this process.",
    ),
    sig(
        "cuda_check_failed_printf",
        # The CUDACHECK macro of NCCL's own examples and of the custom all-reduce kernels that vLLM and SGLang
        # ship (csrc/custom_all_reduce.cuh): printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__,
        # cudaGetErrorString(e)); exit(EXIT_FAILURE). This process's own CUDA call failed, then it exited.
        r"Failed: Cuda error (?P<src_file>[^\s:]{1,200}):(?P<src_line>\d+) '(?P<cuda_error>[^'\n]{1,200})'",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["Failed: Cuda error"],
        "A CUDACHECK-style macro printed a failed CUDA call at its source line and exited the process.",
        post=cuda_post,
    ),
    sig(
        "rust_alloc_failed",
        # Rust's standard library (library/std/src/alloc.rs default_alloc_error_hook):
        # "memory allocation of {} bytes failed", then abort. Printed by the Rust parts of a Python training
        # stack (HF tokenizers, safetensors, polars) when the host has no memory left to give.
        r"memory allocation of (?:memory allocation of )?(?P<bytes>\d+) bytes failed",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["memory allocation of"],
        "A Rust library in the process could not allocate host memory and aborted (the host ran out of memory).",
    ),
    sig(
        "cuda_check_hex",
        # dusty-nv jetson-utils cuda/cudaUtility.h cudaCheckError (and the many CUDA samples that copied it):
        # LogError(LOG_CUDA "   %s (error %u) (hex 0x%02X)\n", cudaGetErrorString(retval), retval, retval) after the
        # failed call's text: this process's CUDA call failed.
        # (%02X: two hex digits at least, "0x2BC" for 700)
        r"(?P<cuda_error>[A-Za-z][\w ,'-]{2,100}?) \(error (?P<cuda_errno>\d+)\) \(hex 0x[0-9A-Fa-f]{2,8}\)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["(hex 0x"],
        "A CUDA call's error as cudaCheckError-style helpers print it (string, error number, hex).",
        post=cuda_post,
    ),
    sig(
        "hip_error_code",
        # ROCm's HIP runtime (ROCm/clr hipamd/include/hip/hip_runtime_api.h hipError_t names), as its AMD_LOG_LEVEL
        # trace prints them ("init: Returned hipErrorNoBinaryForGpu", hip_platform.cc) and as HIP programs report
        # them: CUDA's errors on AMD GPUs. A poll's hipErrorNotReady and the already-done returns are not failures.
        r"\b(?P<cuda_error>hipError(?!NotReady\b|PeerAccessAlreadyEnabled\b|HostMemoryAlreadyRegistered\b)[A-Z]\w{2,60})",
        K.CRASH,
        C.CUDA_ERROR,
        S.WARNING,
        Blame.NONE,
        ["hiperror"],
        "A HIP (ROCm) runtime call returned an error code (CUDA's errors on an AMD GPU).",
        generic=True,
    ),
)


# what a CUDA error leaves when its own line is cut off
CUT_OFF: tuple[Signature, ...] = (
    sig(
        "cuda_error_suffix",
        # c10/cuda/CUDAMiscFunctions.cpp get_cuda_check_suffix(), appended by c10_cuda_check_implementation
        # (c10/cuda/CUDAException.cpp) to every "CUDA error: ..." message: the note alone proves a CUDA error.
        r"CUDA kernel errors might be asynchronously reported at some other API call",
        K.CRASH,
        C.CUDA_ERROR,
        S.WARNING,
        Blame.NONE,
        ["CUDA kernel errors might be asynchronously"],
        "torch's note after any CUDA error; used when the error line itself is not in the excerpt.",
        generic=True,
    ),
)
