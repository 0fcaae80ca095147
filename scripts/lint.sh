#!/usr/bin/env bash
# The house checks: ruff (lint + format, one line length) and import-linter's layer contracts.
# Run by scripts/test.sh before the tests; on its own: bash scripts/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
.venv/bin/python scripts/import_tree.py "$tree"
cp pyproject.toml "$tree/"
# From the assembled tree, not the repo root: the repo's folders are not laid out as installed.
(cd "$tree" && PYTHONPATH="$tree" "$OLDPWD/.venv/bin/lint-imports" --config pyproject.toml)
