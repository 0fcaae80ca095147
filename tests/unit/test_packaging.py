"""The wheel stays honest: every package folder is listed, and the layers import only downwards."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_dir_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join((root, *init.parent.relative_to(ROOT / folder).parts))
        for root, folder in cfg["package-dir"].items()
        for init in (ROOT / folder).rglob("__init__.py")
        if ".venv" not in init.parts
    }
    assert found == set(cfg["packages"]), f"unlisted: {sorted(found - set(cfg['packages']))}"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


# collectors, analyzers and runtime import only the shared contracts (trainctl.<module>), never
# each other, the CLI (trainctl.cli) or the wiring (trainctl.ops); never bare folder names.
_FORBIDDEN = {
    "collectors": ("trainctl.analyzers", "trainctl.runtime"),
    "analyzers": ("trainctl.collectors", "trainctl.runtime"),
    "runtime": ("trainctl.collectors", "trainctl.analyzers"),
}
_ALWAYS_FORBIDDEN = ("trainctl.cli", "trainctl.ops", "collectors", "analyzers", "runtime", "playbooks")


def test_layers_import_only_downwards() -> None:
    bad = []
    for folder, forbidden in _FORBIDDEN.items():
        for py in (ROOT / folder).rglob("*.py"):
            for name in _imports(py):
                if any(name == f or name.startswith(f + ".") for f in (*forbidden, *_ALWAYS_FORBIDDEN)):
                    bad.append(f"{py.relative_to(ROOT)} imports {name}")
    # The contracts (trainctl/*.py outside cli/ops) import nothing above them either.
    for py in (ROOT / "trainctl").glob("*.py"):
        for name in _imports(py):
            if name.startswith(
                ("trainctl.cli", "trainctl.ops", "trainctl.collectors", "trainctl.analyzers", "trainctl.runtime")
            ):
                bad.append(f"{py.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_contracts_do_not_import_torch_or_cli_libs() -> None:
    # Diagnosing on a laptop needs no torch; training hosts need no typer/rich.
    for py in (ROOT / "trainctl").glob("*.py"):
        heavy = {n for n in _imports(py) if n.split(".")[0] in ("torch", "typer", "rich", "paramiko")}
        assert not heavy, f"{py.name} imports {heavy}"
