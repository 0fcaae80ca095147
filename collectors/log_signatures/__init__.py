"""The log signature table: one rule per line a printer writes, grouped by what failed.

`SIGNATURES` is every rule, in the order they run on a line. The order is part of the behaviour: a line
that several rules match yields its events in this order, and later readings that weigh equal events
take the earlier one (reversing the table changes the finding of some corpus logs). So the families'
tuples are listed here in the order the single table had them, the catch-alls (a CUDA error cut off,
a rendezvous seen only as a traceback) last. Add a rule to the tuple of its family; add a family as a
tuple of its module and place it here.

How a rule is written (and the event it makes): `rule`. Each rule cites its printer's source; the lines
themselves are listed in docs/log-signatures.md and checked by tests/fixtures/logs/source_lines.jsonl.
"""

from __future__ import annotations

from trainctl.collectors.log_signatures import (
    collectives,
    cuda,
    gpu_driver,
    kernel,
    network,
    numerical,
    process_exits,
    processes,
    rendezvous,
)
from trainctl.collectors.log_signatures.gpu_driver import XID_MEANINGS
from trainctl.collectors.log_signatures.rule import Blame, Event, Signature

__all__ = ["SIGNATURES", "XID_MEANINGS", "Blame", "Event", "Signature"]

SIGNATURES: tuple[Signature, ...] = (
    *collectives.TIMEOUTS,
    *network.ERRORS,
    *rendezvous.STORE,
    *process_exits.EXITS,
    *cuda.ERRORS,
    *numerical.LOSS,
    *gpu_driver.XIDS,
    *network.NCCL_TRANSPORTS,
    *network.NCCL_SETUP,
    *rendezvous.C10D_GLOO,
    *process_exits.LAUNCHERS,
    *gpu_driver.NVIDIA_SMI,
    *gpu_driver.DRIVER,
    *kernel.MACHINE,
    *processes.LISTINGS,
    *numerical.FRAMEWORK_CHECKS,
    *collectives.DEVICE_CHECK,
    *cuda.CUT_OFF,
    *processes.STACKS,
    *rendezvous.TRACEBACKS,
)
