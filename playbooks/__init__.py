"""Built-in playbooks (YAML package data), loaded with importlib.resources.files(__name__)."""
