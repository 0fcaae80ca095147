"""Runtime: what runs on the training hosts.

The reference trainer, the instrumentation of unmodified user scripts, the launcher glue around
torchrun, heartbeats, the supervisor's pure policy, async checkpoints and fault injection for
drills. Imports torch lazily where it can, so `trainctl.runtime` modules that need no torch (the
metrics agent) work on a host without it.
"""
