"""Simulated data for demos, tests and benchmarks (not on the diagnosis path): the fleet simulator."""
