"""Playbooks (what other tools call runbooks): the YAML model, its expressions and the engine that runs them."""
