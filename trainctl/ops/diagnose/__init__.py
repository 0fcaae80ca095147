"""Diagnosis: detect what a path holds, load its signals (tables and raw artefacts), run the analyzers."""
