"""Wiring that is not rendering: load inputs, run analyzers, supervise, keep the ledger.

Part of the CLI layer: it may import collectors, analyzers and runtime; they never import it.
"""
