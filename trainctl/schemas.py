"""Parquet contracts: one schema per signal kind (DESIGN.md, "Parquet dataset").

Each table is a folder of Parquet files hive-partitioned by host:
`DATASET/<kind>/host=<host>/part-*.parquet`. `host` comes from the path and is not stored in the
files; readers (trainctl.dataset) add it back as a string column. Column names carry their units
(`_ns`, `_bytes`, `_pct`, `_w`, `_c`, `_mhz`, `_s`). Each file carries the kind and schema version
in its Arrow metadata so a reader can refuse a file written against another contract.

Nullable columns may be null where a device or a source lacks the value; a writer may omit a
nullable column entirely (the reader fills it with nulls), but never a required one. So adding a
nullable column is an additive change that keeps SCHEMA_VERSION: older files read with the new
column all null, and older readers drop the column they do not know (dataset.conform). Removing a
column, renaming one, changing a type or making one required is a breaking change: bump the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

import pyarrow as pa

__all__ = [
    "SCHEMA_VERSION",
    "META_KIND",
    "META_VERSION",
    "SignalKind",
    "Phase",
    "SCHEMAS",
    "schema_for",
    "empty_table",
    "PRINTER_RANK_BASES",
]

SCHEMA_VERSION = 1
META_KIND = b"trainctl.kind"
META_VERSION = b"trainctl.schema_version"

_TS = pa.timestamp("ns", tz="UTC")
# Low-cardinality identity strings (a GPU's product name repeated in every 1 Hz row): dictionary
# encoded so a 7M-row scan reads a few integers per row, not the string.
_DICT_STR = pa.dictionary(pa.int32(), pa.string())


class SignalKind(str, Enum):
    TIMELINE = "timeline"
    COLLECTIVES = "collectives"
    GPU_METRICS = "gpu_metrics"
    HOST_METRICS = "host_metrics"
    LOG_EVENTS = "log_events"
    STACKS = "stacks"
    COLLECTION_STATUS = "collection_status"
    HOST_FACTS = "host_facts"
    PG_STATUS = "pg_status"
    FR_DUMPS = "fr_dumps"
    NCCL_PROCS = "nccl_procs"
    NCCL_LINKS = "nccl_links"
    RUN_EVENTS = "run_events"


class Phase(str, Enum):
    """Values of timeline.phase.

    The reference trainer records data/forward/backward/communication/optimizer (and `step`, the
    whole step). An unmodified user script gives `compute` (step start to its first collective:
    input + forward + backward as the rank saw them), `wait` (first collective entered to step end)
    and `data` where the DataLoader could be timed.
    """

    DATA = "data"
    FORWARD = "forward"
    BACKWARD = "backward"
    COMMUNICATION = "communication"
    OPTIMIZER = "optimizer"
    STEP = "step"
    COMPUTE = "compute"
    WAIT = "wait"


def _f(name: str, typ: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable)


_FIELDS: Mapping[SignalKind, list[pa.Field]] = {
    # rank x step x phase; durations are intra-rank so host clock offsets do not matter.
    SignalKind.TIMELINE: [
        _f("rank", pa.int32(), False),
        _f("local_rank", pa.int16()),
        _f("step", pa.int64(), False),
        _f("phase", pa.string(), False),
        _f("start_ts", _TS),
        _f("duration_ns", pa.int64(), False),
        _f("tokens", pa.int64()),  # tokens this rank processed in this step (packed batches)
        _f("source", pa.string()),  # cuda_event | perf_counter | flight_recorder
    ],
    # rank x process group x seq, from Flight Recorder dumps or the runtime's own traces.
    SignalKind.COLLECTIVES: [
        _f("rank", pa.int32(), False),
        _f("pg_name", pa.string(), False),
        _f("pg_desc", pa.string()),
        _f("pg_ranks", pa.list_(pa.int32())),  # global ranks of the group, null if unknown (gloo)
        _f("seq", pa.int64()),  # collective_seq_id within the group; null for p2p
        _f("p2p_seq", pa.int64()),
        _f("record_id", pa.int64()),
        _f("op", pa.string(), False),  # all_reduce, broadcast, all_gather, barrier, send, recv, ...
        _f("input_sizes", pa.list_(pa.list_(pa.int64()))),
        _f("output_sizes", pa.list_(pa.list_(pa.int64()))),
        _f("input_dtypes", pa.list_(pa.string())),
        _f("output_dtypes", pa.list_(pa.string())),
        _f("enqueue_ts", _TS),
        _f("start_ts", _TS),
        _f("end_ts", _TS),
        _f("state", pa.string()),  # scheduled | started | completed
        _f("retired", pa.bool_()),
        _f("timeout_ms", pa.int64()),
        _f("frames", pa.string()),  # JSON list of {name, filename, line}, innermost last
        # The communication library that recorded the entry (profiling_name's prefix: nccl, gloo,
        # ...). A group's gloo and NCCL halves keep separate seq counters, so (backend, pg_name)
        # is the key of a sequence, not pg_name alone. Null in datasets written before it existed.
        _f("backend", pa.string()),
        # send/recv: the group rank of the other side ("nccl:send 1->2" -> 2, "nccl:recv 3<-0" -> 0).
        _f("peer", pa.int32()),
    ],
    # One row per GPU per sample. NVML calls and their DCGM field equivalents: docs/faulty-hosts.md.
    SignalKind.GPU_METRICS: [
        _f("ts", _TS, False),
        _f("gpu", pa.int16(), False),
        _f("gpu_uuid", pa.string()),
        _f("pci_bus_id", pa.string()),
        _f("gpu_name", _DICT_STR),  # product name (SKU), e.g. "NVIDIA H100 80GB HBM3": peers share it
        _f("vbios_version", _DICT_STR),
        _f("sm_util_pct", pa.float32()),
        _f("mem_util_pct", pa.float32()),
        _f("power_w", pa.float32()),
        _f("power_limit_w", pa.float32()),  # enforced limit: min of every limit in force (user, board, ...)
        _f("power_limit_default_w", pa.float32()),  # the board's default power-management limit
        _f("temp_c", pa.float32()),
        _f("temp_slowdown_c", pa.float32()),  # temperature at which the GPU starts slowing its clocks
        _f("sm_clock_mhz", pa.int32()),
        _f("sm_clock_max_mhz", pa.int32()),
        _f("mem_used_bytes", pa.int64()),
        _f("mem_total_bytes", pa.int64()),
        _f("pcie_link_gen", pa.int8()),
        _f("pcie_link_gen_max", pa.int8()),
        _f("pcie_link_width", pa.int8()),
        _f("pcie_link_width_max", pa.int8()),
        _f("pcie_replay_errors_total", pa.int64()),  # PCIe replays since reset: link-level retries
        _f("ecc_sbe_volatile", pa.int64()),
        _f("ecc_dbe_volatile", pa.int64()),
        _f("ecc_sbe_total", pa.int64()),
        _f("ecc_dbe_total", pa.int64()),
        _f("retired_pages", pa.int64()),
        _f("nvlink_crc_errors_total", pa.int64()),
        _f("throttle_reasons", pa.uint64()),  # NVML clocks-event-reasons bitmask
        _f("xid", pa.int32()),  # last Xid seen on this GPU, null if none
    ],
    SignalKind.HOST_METRICS: [
        _f("ts", _TS, False),
        _f("cpu_util_pct", pa.float32()),
        _f("mem_used_bytes", pa.int64()),
        _f("mem_total_bytes", pa.int64()),
        _f("net_rx_bytes_per_s", pa.float64()),
        _f("net_tx_bytes_per_s", pa.float64()),
        _f("load1", pa.float32()),
        _f("gpu_count", pa.int16()),  # GPUs NVML enumerates now: a drop is a lost GPU
        # InfiniBand / RoCE ports (/sys/class/infiniband), summed over the host's ports; null without any.
        _f("ib_ports", pa.int16()),
        _f("ib_ports_active", pa.int16()),  # a port that left ACTIVE is a link down
        _f("ib_rx_bytes_per_s", pa.float64()),
        _f("ib_tx_bytes_per_s", pa.float64()),
        _f("ib_link_downed", pa.int64()),  # cumulative link_downed
        _f("ib_errors", pa.int64()),  # cumulative symbol/recovery/rcv/integrity/overrun errors
    ],
    # Parsed, classified log lines (rank logs, kernel logs, pasted logs).
    SignalKind.LOG_EVENTS: [
        _f("ts", _TS),
        _f("source", pa.string(), False),  # file the line came from
        _f("line_no", pa.int64(), False),
        _f("rank", pa.int32()),
        _f("kind", pa.string()),  # a FindingKind value, null for context lines
        _f("category", pa.string()),
        _f("severity", pa.string()),
        _f("signature", pa.string()),  # name of the rule that matched
        _f("pg", pa.string()),
        _f("seq", pa.int64()),
        _f("op", pa.string()),
        _f("xid", pa.int32()),
        _f("gpu_pci", pa.string()),
        _f("exit_code", pa.int32()),
        _f("message", pa.string(), False),
        # What the line on its own implicates (null = the line blames nobody): a rank log's own
        # CUDA error names its rank; a watchdog timeout names only its reporter, so no culprit.
        _f("culprit_rank", pa.int32()),
        _f("culprit_host", pa.string()),
        _f(
            "fields", pa.string()
        ),  # JSON object: other extracted fields (peer, timeout_ms, culprit_basis, generic, ...)
    ],
    # Python stacks of live ranks (py-spy dump, faulthandler/dump_traceback, FR frames).
    SignalKind.STACKS: [
        _f("ts", _TS),
        _f("rank", pa.int32(), False),
        _f("pid", pa.int32()),
        _f("thread", pa.string()),
        _f("depth", pa.int16(), False),  # 0 = innermost frame (where the thread is now)
        _f("function", pa.string(), False),
        _f("filename", pa.string()),
        _f("line", pa.int32()),
        _f("source", pa.string()),  # py-spy | dump_traceback | flight_recorder
    ],
    # host x kind: did collection work, and if not, why (missing data is never silent).
    SignalKind.COLLECTION_STATUS: [
        _f("kind", pa.string(), False),
        _f("ok", pa.bool_(), False),
        _f("rows", pa.int64()),
        _f("bytes", pa.int64()),
        _f("duration_s", pa.float64()),
        _f("error_type", pa.string()),
        _f("error", pa.string()),
        _f("started_ts", _TS),
    ],
    # rank x process group: Flight Recorder's pg_status (one row per group per dump). The counters
    # survive ring-buffer wrap, so they say how far each rank got even when its entries are gone.
    SignalKind.PG_STATUS: [
        _f("rank", pa.int32(), False),
        _f("pg_name", pa.string(), False),
        _f("last_enqueued_seq", pa.int64()),
        _f("last_started_seq", pa.int64()),  # -1 on gloo (never tracked)
        _f("last_completed_seq", pa.int64()),  # on gloo: retired, which includes timed-out ops
        _f("fr_version", pa.string()),
        _f("source", pa.string()),  # the dump file this row came from
        _f("backend", pa.string()),  # as collectives.backend (the entries of that pg_id say which)
    ],
    # rank x recorder: one row per Flight Recorder dump read, empty ones included. Says who dumped
    # at all (a rank without a row left no dump), whose ring buffer rolled over (first_record_id >
    # 0: older entries are gone, so that rank is "unknown" before them, not "absent"), and whose
    # buffer is empty (it recorded nothing: recording off, or no collective issued).
    SignalKind.FR_DUMPS: [
        _f("rank", pa.int32(), False),
        _f("recorder", pa.string(), False),  # nccl (ProcessGroupNCCL's recorder) | cpu (gloo, hooks)
        _f("fr_version", pa.string()),
        _f("comm_lib_version", pa.string()),
        _f("entries", pa.int64()),
        _f("first_record_id", pa.int64()),
        _f("last_record_id", pa.int64()),
        _f("groups_configured", pa.int32()),  # pg_config entries (0: no group was ever recorded)
        _f("source", pa.string()),
    ],
    # One row per process whose NCCL wrote INFO init lines (NCCL_DEBUG=INFO, logs/H/nccl-rank-R.log;
    # trainctl.collectors.nccl_topology): what it chose, so a fallback to sockets is a fact, not a guess.
    SignalKind.NCCL_PROCS: [
        _f("rank", pa.int32()),  # trainctl's rank (from the file name), else NCCL's in its largest comm
        _f("pid", pa.int64()),
        _f("hostname", pa.string()),  # as NCCL logged it (the machine's own name)
        _f("cuda_dev", pa.int16()),
        _f("nccl_version", pa.string()),
        _f("network", pa.string()),  # "Using network X": IB, Socket, or a plugin's name
        _f("net_plugin", pa.string()),
        _f("net_devices", pa.string()),  # "IB: [0]mlx5_0:1/IB ..." / "Socket: [0]eth0:10.0.0.1<0>"
        _f("gdr", pa.bool_()),  # GPU Direct RDMA enabled for at least one HCA
        _f("nccl_rank", pa.int32()),
        _f("nccl_nranks", pa.int32()),
        _f("links_net", pa.int32()),  # channel connections by transport
        _f("links_p2p", pa.int32()),
        _f("links_shm", pa.int32()),
        _f("warnings", pa.int32()),  # NCCL WARN lines in the same file
        _f("source", pa.string()),
    ],
    # One row per channel connection NCCL set up ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read").
    SignalKind.NCCL_LINKS: [
        _f("rank", pa.int32()),  # the process that logged it (as nccl_procs.rank)
        _f("channel", pa.int16()),
        _f("src_rank", pa.int32()),  # NCCL ranks of the communicator
        _f("dst_rank", pa.int32()),
        _f("direction", pa.string()),  # send | receive (NET links) | null
        _f("transport", pa.string()),  # P2P | SHM | NET
        _f("detail", pa.string()),  # IPC/read, CUMEM, direct/direct, IB/0/GDRDMA, Socket/1, ...
    ],
    # What the runtime itself recorded about a rank's failure, from structured files in the run dir
    # (trainctl.ops.diagnose.run_events): a torchelastic error file (errors/rank-R.json: exception,
    # traceback, time) or the first non-finite loss (numerics/rank-R.json). Read, never guessed from
    # text, so the first failing rank is torchelastic's own (smallest error-file timestamp).
    SignalKind.RUN_EVENTS: [
        _f("ts", _TS),
        _f("rank", pa.int32(), False),
        _f("event", pa.string(), False),  # exception | nonfinite_loss | hang_detected
        _f("step", pa.int64()),
        _f("message", pa.string()),  # "RuntimeError: ...", or the loss value ("nan", "inf")
        _f("detail", pa.string()),  # the traceback's last frames
        _f("source", pa.string()),
        # An exception's message as the log signatures classify it (collectors/logs.py, filled by
        # trainctl.ops.diagnose.run_events for a run dir and a collected dataset alike): the
        # FindingKind and Category values a log line saying it gets (oom, crash/cuda_error,
        # network_error/nccl, faulty_host/ecc, ...); null when no signature knows the message, for
        # other events, and in files written before these columns (absent is read as null).
        _f("kind", pa.string()),
        _f("category", pa.string()),
    ],
    SignalKind.HOST_FACTS: [
        _f("collected_ts", _TS),
        _f("kernel", pa.string()),
        _f("driver_version", pa.string()),
        _f("cuda_version", pa.string()),
        _f("nccl_version", pa.string()),
        _f("torch_version", pa.string()),
        _f("python_version", pa.string()),
        _f("gpu_model", pa.string()),
        _f("gpu_count", pa.int16()),
    ],
}


def _schema(kind: SignalKind) -> pa.Schema:
    return pa.schema(
        _FIELDS[kind],
        metadata={META_KIND: kind.value.encode(), META_VERSION: str(SCHEMA_VERSION).encode()},
    )


SCHEMAS: Mapping[SignalKind, pa.Schema] = {k: _schema(k) for k in SignalKind}


def schema_for(kind: SignalKind | str) -> pa.Schema:
    """The file schema of a kind (without the `host` partition column)."""
    return SCHEMAS[SignalKind(kind)]


def empty_table(kind: SignalKind | str | pa.Schema, *, host_column: str | None = None) -> pa.Table:
    """No rows, a kind's schema (or the one given), plus a string `host_column` when named.

    Not from empty Python lists (nor pa.Schema.empty_table(), which converts them): pyarrow imports
    pandas (~0.25 s) on its first conversion of Python values, and a run dir without logs, dumps or
    stacks needs pandas nowhere else.
    """
    schema = kind if isinstance(kind, pa.Schema) else schema_for(kind)
    if host_column is not None:
        schema = schema.append(pa.field(host_column, pa.string()))
    return pa.Table.from_batches([], schema)


# log_events.fields["rank_basis"] values that name the global rank of the process that printed the line: a
# launcher's or framework's prefix on its every line (collectors/log_records.py), torch's "[rank3]:", Lightning's
# "[rank: 3]", Determined's "[rank=3]", horovodrun's "[3]<stdout>:", Open MPI's "[1,3]<stderr>:". The log collector
# writes them; the log analyzer reads them to tell whose line it is.
PRINTER_RANK_BASES = frozenset({"rank_prefix", "lightning_rank", "determined_rank", "horovod_tag", "mpi_tag"})
