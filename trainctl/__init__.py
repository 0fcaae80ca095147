"""trainctl: SRE diagnosis of distributed training runs.

This package root holds only the contracts every part imports (errors, schemas, findings,
dataset I/O, run-dir layout, inventory). The CLI lives in `trainctl.cli`; keep this file free of
imports so that `trainctl.runtime` on a training host does not pull in the CLI.
"""

__version__ = "0.1.0"
