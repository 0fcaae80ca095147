"""One error root, one subclass per failure domain.

Every message names the offending value and the fix, because the CLI prints `str(error)` as the
whole user-facing explanation (exit code 1, no traceback). Never put secrets (passwords, key
material) into a message.
"""

from __future__ import annotations

__all__ = [
    "TrainctlError",
    "InputError",
    "UsageError",
    "DatasetError",
    "SchemaMismatch",
    "InventoryError",
    "LaunchError",
    "CollectError",
    "HostUnreachable",
    "HostKeyError",
    "FlightRecorderError",
    "UnsafePickleError",
    "LedgerError",
    "SchedulerError",
    "CheckpointError",
    "PlaybookError",
    "PlaybookInvalid",
]


class TrainctlError(Exception):
    """Root of every error trainctl raises on purpose; the CLI turns it into one line and exit 1."""


class InputError(TrainctlError):
    """A path or value given by the user is not what the command expects."""


class UsageError(InputError):
    """The command line asks for something that cannot work as given (an output path onto the command's
    own input): one line like any trainctl error, but exit 2, the usage code, and before anything is written."""


class DatasetError(TrainctlError):
    """A dataset or run directory cannot be read (missing, truncated, not Parquet)."""


class SchemaMismatch(DatasetError):
    """A Parquet file's columns or schema version differ from the contract in trainctl.schemas."""


class InventoryError(TrainctlError):
    """A host list, hostfile or Slurm nodelist cannot be parsed."""


class LaunchError(TrainctlError):
    """A run could not be started or supervised (torchrun missing, bad spec, quarantined host)."""


class CollectError(TrainctlError):
    """Collection failed as a whole (more hosts failed than --max-failed-hosts allows)."""


class HostUnreachable(CollectError):
    """One host could not be reached over SSH (recorded per host, fatal only past the limit)."""


class HostKeyError(CollectError):
    """A host's SSH key is unknown or changed; trainctl never trusts it silently."""


class FlightRecorderError(DatasetError):
    """A Flight Recorder dump cannot be read."""


class UnsafePickleError(FlightRecorderError):
    """A pickle asked to build an object that is not a plain container or scalar."""


class LedgerError(TrainctlError):
    """The quarantine ledger cannot be read or written."""


class SchedulerError(TrainctlError):
    """A scheduler adapter (Slurm, Kubernetes) failed to drain or cordon a node."""


class CheckpointError(TrainctlError):
    """No usable checkpoint, or one failed its checksum."""


class PlaybookError(TrainctlError):
    """A playbook failed while running."""


class PlaybookInvalid(PlaybookError):
    """A playbook file does not follow the schema (message names file, line and fix)."""
