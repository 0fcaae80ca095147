"""The trainctl command line (Typer). It wires the layers together and renders; no detection logic."""
