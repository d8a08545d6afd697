#!/usr/bin/env bash
# Install rpent (editable) with everything the main job and the tests need, into the ACTIVE Python
# (activate a Python 3.11 virtualenv first). Idempotent: re-running only installs what is missing.
#
#   scripts/install.sh                 # runtime + dev (pytest) + flywheel + train (lerobot) + ray dependencies
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/install.sh
#                                      # where no local CPU torch wheel is configured, fetch the
#                                      # CPU build (~200 MB) instead of the multi-GB CUDA one
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"

"$PY" - <<'PYCHECK'
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit(f"rpent needs Python 3.11; {sys.executable} is {sys.version.split()[0]}. "
             "Activate a Python 3.11 virtualenv (python3.11 -m venv .venv && . .venv/bin/activate).")
if sys.prefix == sys.base_prefix:
    print("warning: not inside a virtualenv; installing into", sys.prefix, file=sys.stderr)
PYCHECK

# torch first, pinned, so the resolver never pulls a different (CUDA, multi-GB) build.
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.__version__.split("+")[0] == "2.13.0" else 1)' 2>/dev/null; then
    "$PY" -m pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==2.13.0"
fi
"$PY" -m pip install -e ".[dev,flywheel,train,ray]"  # ray: the multi-node tests (tests/cluster) need it; train: rpent-train
# lerobot 0.4.4 (LeRobot v3.0 datasets) pins torch<2.11; its dataset code runs on torch 2.13.0, so it
# goes in without its own dependency pins (the flywheel extra above lists what it needs).
if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("lerobot") == "0.4.4" else 1)' 2>/dev/null; then
    "$PY" -m pip install --no-deps "lerobot==0.4.4"
fi
"$PY" -c 'import rpent.rpc, rpent.services, rpent_tui; print("rpent installed:", rpent.__file__)'
