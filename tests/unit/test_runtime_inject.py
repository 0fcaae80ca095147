"""Drill spec parsing: exact records for good specs, one InputError naming spec and fix for bad ones."""

from __future__ import annotations

import json

import pytest

from trainctl.errors import InputError
from trainctl.runtime import inject
from trainctl.runtime.inject import Crash, Hang, NanLoss, Straggler, Xid


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("straggler:rank=2,factor=1.5", Straggler(rank=2, factor=1.5, phase="forward")),
        ("straggler:rank=2,factor=1.5,phase=data", Straggler(rank=2, factor=1.5, phase="data")),
        (" straggler : rank = 7 , factor = 3 ", Straggler(rank=7, factor=3.0)),
        ("hang:rank=3,step=20", Hang(rank=3, step=20)),
        ("crash:rank=1,step=30", Crash(rank=1, step=30)),
        ("nan:rank=0,step=10", NanLoss(rank=0, step=10)),
        ("xid:host=node02,code=79,step=5", Xid(host="node02", code=79, step=5)),
    ],
)
def test_parse_good_specs(spec: str, expected: object) -> None:
    assert inject.parse_spec(spec) == expected


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("slow:rank=1", "unknown drill 'slow'"),
        ("hang", "hang needs parameters rank, step"),
        ("hang:rank=3", "hang is missing step"),
        ("hang:rank=x,step=1", "rank='x' is not an integer"),
        ("crash:rank=1,step=2,when=now", "crash has no parameter 'when'"),
        ("crash:rank=1,rank=2,step=2", "parameter 'rank' given twice"),
        ("straggler:rank=1,factor=0.5", "factor=0.5 must be > 1"),
        ("straggler:rank=1,factor=2,phase=io", "phase='io' must be one of"),
        ("nan:rank=-1,step=2", "rank must be >= 0"),
        ("nan:rank1,step=2", "'rank1' is not key=value"),
    ],
)
def test_bad_specs_name_spec_and_fix(spec: str, needle: str) -> None:
    with pytest.raises(InputError) as ei:
        inject.parse_spec(spec)
    msg = str(ei.value)
    assert needle in msg
    assert repr(spec) in msg
    assert "straggler:rank=2,factor=1.5" in msg  # the fix: valid examples


def test_env_roundtrip_and_for_rank() -> None:
    env = {
        inject.ENV_VAR: json.dumps(["straggler:rank=2,factor=1.5", "hang:rank=3,step=20", "xid:host=n,code=79,step=1"])
    }
    drills = inject.from_env(env)
    assert inject.for_rank(drills, 2) == (Straggler(2, 1.5),)
    assert inject.for_rank(drills, 3) == (Hang(3, 20),)
    assert inject.for_rank(drills, 0) == ()
    assert inject.from_env({}) == ()
    with pytest.raises(InputError, match="TRAINCTL_INJECT"):
        inject.from_env({inject.ENV_VAR: "straggler"})
