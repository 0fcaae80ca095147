#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine (venv, torch, Debian's openssh-server,
# Slurm and munge for the loopback test clusters), checks the house (scripts/lint.sh) and runs the suite.
# Extra args go to pytest. `--gpu` first: only the GPU suite (tests/gpu, needs CUDA torch and a GPU;
# set TORCH_INDEX_URL / TORCH_VERSION for a CUDA build of torch).
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian packages the tests use: openssh-server (real sshd test hosts), chromium (the HTML report is
# rendered headless and must log no console error), Slurm and munge (a real loopback Slurm cluster for
# `collect --srun`: tests/slurm_cluster.py).
NEED=; [ -x /usr/sbin/sshd ] || NEED="$NEED openssh-server"; command -v chromium >/dev/null || NEED="$NEED chromium"
{ [ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ] && command -v srun >/dev/null; } ||
  NEED="$NEED slurmd slurmctld slurm-client munge"
if [ -n "$NEED" ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $NEED >/dev/null
fi
bash scripts/setup.sh
bash scripts/lint.sh  # ruff (lint + format) and the import-linter layer contracts
if [ "${1:-}" = "--gpu" ]; then
  shift
  exec .venv/bin/pytest tests/gpu -m gpu -p no:cacheprovider "$@"
fi
exec .venv/bin/pytest "$@"
