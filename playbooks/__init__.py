"""Built-in runbooks (YAML package data), loaded with importlib.resources.files(__name__)."""
