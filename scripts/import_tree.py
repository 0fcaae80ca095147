"""Assemble the installed package tree (one `trainctl` folder) from the repo's mapped folders.

pyproject maps collectors/, analyzers/, runtime/ and playbooks/ under the import name `trainctl`
(setuptools package-dir). Tools that walk the file system (import-linter's grimp) cannot follow
that mapping, so this copies the .py files into DEST/trainctl/... as the wheel lays them out.

    python scripts/import_tree.py DEST      # then: PYTHONPATH=DEST lint-imports (from outside the repo)
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(dest: Path) -> Path:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    # Longest import names last, so trainctl.collectors lands inside the trainctl copy.
    for name, folder in sorted(mapping.items(), key=lambda kv: kv[0].count(".")):
        target = dest.joinpath(*name.split("."))
        for src in (ROOT / folder).rglob("*.py"):
            rel = src.relative_to(ROOT / folder)
            if rel.parts[0] in mapping.values() and name == "trainctl":
                continue
            out = target / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
    return dest


if __name__ == "__main__":
    build(Path(sys.argv[1]))
