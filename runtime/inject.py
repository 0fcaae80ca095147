"""Fault-injection drills: parse `--inject` specs into frozen records the trainer acts on.

Specs (DESIGN.md CLI): `straggler:rank=2,factor=1.5[,phase=forward|data]`, `hang:rank=3,step=20`,
`crash:rank=1,step=30`, `nan:rank=0,step=10`, `xid:host=H,code=79,step=S`. The launcher validates
them before starting anything (a typo must not cost a cluster launch) and passes them to every
rank as JSON in TRAINCTL_INJECT; each rank re-parses and keeps the drills aimed at it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from trainctl.errors import InputError

__all__ = [
    "Straggler",
    "Hang",
    "Crash",
    "NanLoss",
    "Xid",
    "Drill",
    "parse_spec",
    "parse_specs",
    "from_env",
    "ENV_VAR",
    "STRAGGLER_PHASES",
]

ENV_VAR = "TRAINCTL_INJECT"
STRAGGLER_PHASES = ("forward", "backward", "data", "optimizer")

_EXAMPLES = (
    "straggler:rank=2,factor=1.5[,phase=forward|data], hang:rank=3,step=20, crash:rank=1,step=30, "
    "nan:rank=0,step=10, xid:host=node02,code=79,step=5"
)


@dataclass(frozen=True)
class Straggler:
    """Rank `rank` takes `factor` x its normal time in `phase`, every step from `start_step`."""

    rank: int
    factor: float
    phase: str = "forward"
    start_step: int = 0

    def spec(self) -> str:
        return f"straggler:rank={self.rank},factor={self.factor},phase={self.phase},start_step={self.start_step}"


@dataclass(frozen=True)
class Hang:
    """Rank `rank` blocks forever before its first collective of step `step`."""

    rank: int
    step: int

    def spec(self) -> str:
        return f"hang:rank={self.rank},step={self.step}"


@dataclass(frozen=True)
class Crash:
    """Rank `rank` raises at step `step` and exits non-zero (torchelastic error file written)."""

    rank: int
    step: int

    def spec(self) -> str:
        return f"crash:rank={self.rank},step={self.step}"


@dataclass(frozen=True)
class NanLoss:
    """Rank `rank` makes its loss NaN from step `step` on."""

    rank: int
    step: int

    def spec(self) -> str:
        return f"nan:rank={self.rank},step={self.step}"


@dataclass(frozen=True)
class Xid:
    """Host `host` reports NVIDIA Xid `code` at step `step` (parsed now; simulated by the metrics agent)."""

    host: str
    code: int
    step: int

    def spec(self) -> str:
        return f"xid:host={self.host},code={self.code},step={self.step}"


Drill = Straggler | Hang | Crash | NanLoss | Xid

# kind -> (record, {param: (type, required)})
_KINDS: dict[str, tuple[type, dict[str, tuple[type, bool]]]] = {
    "straggler": (
        Straggler,
        {"rank": (int, True), "factor": (float, True), "phase": (str, False), "start_step": (int, False)},
    ),
    "hang": (Hang, {"rank": (int, True), "step": (int, True)}),
    "crash": (Crash, {"rank": (int, True), "step": (int, True)}),
    "nan": (NanLoss, {"rank": (int, True), "step": (int, True)}),
    "xid": (Xid, {"host": (str, True), "code": (int, True), "step": (int, True)}),
}


def _bad(spec: str, why: str) -> InputError:
    return InputError(f"--inject {spec!r}: {why}; expected one of: {_EXAMPLES}")


def parse_spec(spec: str) -> Drill:
    """Parse one drill spec; raises InputError naming the spec and the fix."""
    kind, sep, rest = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in _KINDS:
        raise _bad(spec, f"unknown drill {kind!r} (known: {', '.join(_KINDS)})")
    cls, params = _KINDS[kind]
    if not sep or not rest.strip():
        raise _bad(spec, f"{kind} needs parameters {', '.join(p for p, (_, req) in params.items() if req)}")
    values: dict[str, object] = {}
    for item in rest.split(","):
        key, eq, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or not key or not raw:
            raise _bad(spec, f"{item.strip()!r} is not key=value")
        if key not in params:
            raise _bad(spec, f"{kind} has no parameter {key!r} (it takes {', '.join(params)})")
        if key in values:
            raise _bad(spec, f"parameter {key!r} given twice")
        typ = params[key][0]
        try:
            values[key] = typ(raw)
        except ValueError:
            raise _bad(spec, f"{key}={raw!r} is not {'an integer' if typ is int else 'a number'}") from None
    missing = [p for p, (_, req) in params.items() if req and p not in values]
    if missing:
        raise _bad(spec, f"{kind} is missing {', '.join(missing)}")
    for key in ("rank", "step", "code", "start_step"):
        if key in values and int(values[key]) < 0:  # type: ignore[call-overload]
            raise _bad(spec, f"{key} must be >= 0")
    if kind == "straggler":
        factor = float(values["factor"])  # type: ignore[arg-type]
        if not factor > 1.0 or factor > 100.0:
            raise _bad(spec, f"factor={factor} must be > 1 and <= 100 (1.5 = the rank takes 1.5x its normal time)")
        if values.get("phase", "forward") not in STRAGGLER_PHASES:
            raise _bad(spec, f"phase={values['phase']!r} must be one of {', '.join(STRAGGLER_PHASES)}")
    return cls(**values)


def parse_specs(specs: Iterable[str]) -> tuple[Drill, ...]:
    return tuple(parse_spec(s) for s in specs)


def from_env(environ: os._Environ[str] | dict[str, str] | None = None) -> tuple[Drill, ...]:
    """Drills from TRAINCTL_INJECT (a JSON list of spec strings set by `trainctl launch`)."""
    raw = (environ if environ is not None else os.environ).get(ENV_VAR, "")
    if not raw.strip():
        return ()
    try:
        specs = json.loads(raw)
    except ValueError as exc:
        raise InputError(
            f"{ENV_VAR}={raw!r} is not a JSON list of drill specs ({exc}); `trainctl launch --inject` sets it"
        ) from exc
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise InputError(f'{ENV_VAR}={raw!r} must be a JSON list of strings like ["straggler:rank=2,factor=1.5"]')
    return parse_specs(specs)


def for_rank(drills: Iterable[Drill], rank: int) -> tuple[Drill, ...]:
    """The drills aimed at `rank` (xid drills target hosts and are not acted on by ranks)."""
    return tuple(d for d in drills if getattr(d, "rank", None) == rank)
