#!/usr/bin/env bash
# Make the Meta-World env server's own Python environment (separate from the main rpent venv:
# metaworld 3.1.1 pins mujoco==3.3.0, LIBERO's stack needs mujoco 2.3.7; they cannot share one).
# Idempotent: re-running only installs what is missing.
#
#   scripts/install_metaworld.sh                      # makes .venv-metaworld (python3.11)
#   METAWORLD_VENV=/path/venv scripts/install_metaworld.sh
#   PYTHON=python3.12 scripts/install_metaworld.sh    # another base interpreter (3.10-3.12)
#
# Only the env server runs in it (`rpent --robot metaworld` starts it with
# .venv-metaworld/bin/python, or --env-python PATH). It gets metaworld (+ mujoco 3.3.0, gymnasium),
# msgpack and numpy; rpent itself is NOT installed there: the server runs with the repository on
# PYTHONPATH and imports only rpent.rpc (msgpack + numpy) and rpent.robots.metaworld.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VENV="${METAWORLD_VENV:-.venv-metaworld}"

if [ ! -x "$VENV/bin/python" ]; then
    "$BASE_PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
if ! "$VPY" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("metaworld") == "3.1.1" and m.version("packaging") else 1)' 2>/dev/null; then
    "$VPY" -m pip install "metaworld==3.1.1" "msgpack>=1.0,<2" "numpy>=1.26,<3" "packaging"  # gymnasium 1.x imports packaging without declaring it
fi
# The check the env server's readiness depends on: metaworld imports, mujoco is 3.x, rpent's
# server side imports from the repository.
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$VPY" -c '
import mujoco, metaworld, msgpack, numpy
import rpent.robots.metaworld.env_server  # noqa: F401  (the server module imports cleanly)
print("metaworld env installed:", metaworld.__file__, "mujoco", mujoco.__version__)
'
