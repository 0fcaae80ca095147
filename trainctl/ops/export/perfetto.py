"""A run as a trace ui.perfetto.dev (and chrome://tracing) opens: Chrome's Trace Event Format (JSON).

Format: "Trace Event Format" (Google, the document Perfetto's JSON importer follows): an object with
`traceEvents`, each event with `ph` (X complete, i instant, C counter, M metadata), `ts`/`dur` in
microseconds, `pid`/`tid`. The layout here:
- one process per host (M process_name), one thread per rank (M thread_name "rank R"), and each
  step's phases as X slices on the rank's thread (from the timeline table);
- collectives from the Flight Recorder as X slices (enqueue -> completion) on a second thread per
  rank ("rank R collectives"), named op + pg + seq;
- findings as global instant events (i, s=g) at the time they name, or at the end of the trace;
- GPU metrics as counter tracks per host (C "GPU<n> power W", "GPU<n> SM util %").
Events are streamed to the file, so an 8,192-rank run does not sit in memory as one list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from trainctl.findings import Finding
from trainctl.schemas import SignalKind

__all__ = ["trace_events", "write_trace", "MAX_EVENTS"]

MAX_EVENTS = 5_000_000  # past this the trace is cut (said in its metadata): ui.perfetto.dev would not open it anyway
_COLL_TID_OFFSET = 1_000_000


def _us(ns: Any) -> float | None:
    return None if ns is None else int(ns) / 1000.0


def _ns(v: Any) -> int | None:
    if v is None:
        return None
    return int(v.timestamp() * 1e9) if hasattr(v, "timestamp") else int(v)


def _batches(t: Any, columns: list[str]) -> Iterator[dict[str, list]]:
    if isinstance(t, pa.Table):
        for b in t.select([c for c in columns if c in t.column_names]).to_batches(max_chunksize=65536):
            yield b.to_pydict()
    else:  # a lazy dataset
        for b in t.to_batches(columns=[c for c in columns if c in t.schema.names], batch_size=65536):
            yield b.to_pydict()


def trace_events(
    tables: Mapping[SignalKind, Any], rank_to_host: Mapping[int, str], findings: Iterable[Finding] = ()
) -> Iterator[dict[str, Any]]:
    hosts = sorted(set(rank_to_host.values()))
    pid = {h: i + 1 for i, h in enumerate(hosts)}

    def pid_of(rank: int, host: Any = None) -> int:
        h = rank_to_host.get(rank) or (str(host) if host else "unknown")
        if h not in pid:
            pid[h] = len(pid) + 1
            yield_meta.append({"ph": "M", "name": "process_name", "pid": pid[h], "args": {"name": h}})
        return pid[h]

    yield_meta: list[dict[str, Any]] = []
    for h, p in pid.items():
        yield {"ph": "M", "name": "process_name", "pid": p, "args": {"name": h}}
    named: set[tuple[int, int]] = set()
    cursor: dict[int, float] = {}
    last_us = 0.0
    t = tables.get(SignalKind.TIMELINE)
    if t is not None:
        for b in _batches(t, ["rank", "step", "phase", "start_ts", "duration_ns", "host"]):
            for i in range(len(b["rank"])):
                r = int(b["rank"][i])
                p = pid_of(r, (b.get("host") or [None] * len(b["rank"]))[i])
                yield from yield_meta
                yield_meta.clear()
                if (p, r) not in named:
                    named.add((p, r))
                    yield {"ph": "M", "name": "thread_name", "pid": p, "tid": r, "args": {"name": f"rank {r}"}}
                ts = _us(_ns((b.get("start_ts") or [None] * len(b["rank"]))[i]))
                dur = _us(b["duration_ns"][i])
                if dur is None:
                    continue
                if ts is None:  # a table without start times: lay the rank's phases end to end
                    ts = cursor.get(r, 0.0)
                    cursor[r] = ts + dur
                last_us = max(last_us, ts + dur)
                yield {"ph": "X", "name": str(b["phase"][i]), "cat": "step", "pid": p, "tid": r, "ts": ts,
                       "dur": dur, "args": {"step": int(b["step"][i])}}  # fmt: skip
    c = tables.get(SignalKind.COLLECTIVES)
    if c is not None:
        cols = ["rank", "pg_name", "seq", "p2p_seq", "op", "enqueue_ts", "start_ts", "end_ts", "state", "host"]
        for b in _batches(c, cols):
            for i in range(len(b["rank"])):
                r = int(b["rank"][i])
                p = pid_of(r, (b.get("host") or [None] * len(b["rank"]))[i])
                yield from yield_meta
                yield_meta.clear()
                tid = _COLL_TID_OFFSET + r
                if (p, tid) not in named:
                    named.add((p, tid))
                    yield {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": p,
                        "tid": tid,
                        "args": {"name": f"rank {r} collectives"},
                    }
                t0 = _ns(b["start_ts"][i]) or _ns(b["enqueue_ts"][i])
                if t0 is None:
                    continue
                t1 = _ns(b["end_ts"][i])
                seq = b["seq"][i] if b["seq"][i] is not None else b["p2p_seq"][i]
                name = f"{b['op'][i]} pg {b['pg_name'][i]} seq {seq}"
                args = {"state": b["state"][i]}
                if t1 is None or t1 < t0:  # no end time: an instant (a hang shows as the last one)
                    state = b["state"][i]
                    suffix = "" if state == "completed" else f" ({state or 'no end time'})"
                    yield {"ph": "i", "s": "t", "name": name + suffix, "pid": p, "tid": tid,
                           "ts": _us(t0), "args": args}  # fmt: skip
                else:
                    yield {"ph": "X", "name": name, "cat": "collective", "pid": p, "tid": tid, "ts": _us(t0),
                           "dur": _us(t1 - t0), "args": args}  # fmt: skip
                last_us = max(last_us, _us(t1 or t0) or 0.0)
    g = tables.get(SignalKind.GPU_METRICS)
    if g is not None:
        for b in _batches(g, ["ts", "gpu", "power_w", "sm_util_pct", "host"]):
            hs = b.get("host") or [None] * len(b["ts"])
            for i in range(len(b["ts"])):
                h = str(hs[i]) if hs[i] else "unknown"
                if h not in pid:
                    pid[h] = len(pid) + 1
                    yield {"ph": "M", "name": "process_name", "pid": pid[h], "args": {"name": h}}
                ts = _us(_ns(b["ts"][i]))
                for col, label in (("power_w", "power W"), ("sm_util_pct", "SM util %")):
                    v = b[col][i]
                    if v is not None and ts is not None:
                        yield {"ph": "C", "name": f"GPU{b['gpu'][i]} {label}", "pid": pid[h], "ts": ts,
                               "args": {label: float(v)}}  # fmt: skip
    for f in findings:
        yield {"ph": "i", "s": "g", "name": f"{f.severity.value}: {f.kind.value}", "pid": 0, "tid": 0,
               "ts": last_us, "args": {"summary": f.summary, "ranks": list(f.ranks), "hosts": list(f.hosts)}}  # fmt: skip


def write_trace(out: IO[str] | Path, events: Iterable[dict[str, Any]], *, max_events: int = MAX_EVENTS) -> int:
    """Stream the events as one JSON object; returns how many were written."""
    fh = open(out, "w", encoding="utf-8") if isinstance(out, Path) else out  # noqa: SIM115
    n = 0
    cut = False
    try:
        fh.write('{"displayTimeUnit":"ms","traceEvents":[\n')
        for ev in events:
            if n >= max_events:
                cut = True
                break
            fh.write(("," if n else "") + json.dumps(ev, default=str) + "\n")
            n += 1
        meta = {"producer": "trainctl export --perfetto", "events": n, "cut_at_max_events": cut}
        fh.write('],"metadata":' + json.dumps(meta) + "}\n")
    finally:
        if isinstance(out, Path):
            fh.close()
    return n
