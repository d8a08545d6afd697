#!/usr/bin/env bash
# Set up rpent on a fresh Debian/Ubuntu machine: everything the main job and the default tests need.
# Idempotent: a second run only checks, and installs what is missing.
#
#   scripts/install.sh                  # system packages (apt), .venv (Python 3.11), rpent + extras,
#                                       # lerobot, the Meta-World environment (.venv-metaworld)
#   scripts/install.sh --no-system      # skip the apt phase (install the listed packages yourself)
#   scripts/install.sh --no-metaworld   # skip .venv-metaworld (the Meta-World tests then skip, saying why)
#   scripts/install.sh --venv DIR       # the virtualenv to use or create (default: the active one, else .venv)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/install.sh
#                                       # where no local CPU torch wheel is configured: fetch the CPU
#                                       # build (~200 MB) instead of the multi-GB CUDA one
#
# Then: `. .venv/bin/activate` (or run .venv/bin/rpent ...), the main job, `python -m pytest -q`.
set -euo pipefail
cd "$(dirname "$0")/.."

SYSTEM=1
METAWORLD=1
VENV="${VIRTUAL_ENV:-}"
while [ $# -gt 0 ]; do
    case "$1" in
        --no-system) SYSTEM=0 ;;
        --no-metaworld) METAWORLD=0 ;;
        --venv) VENV="${2:?--venv needs a directory}"; shift ;;
        --venv=*) VENV="${1#--venv=}" ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option '$1' (see scripts/install.sh --help)" >&2; exit 2 ;;
    esac
    shift
done
VENV="${VENV:-.venv}"
EXTRAS="${RPENT_EXTRAS:-dev,flywheel,ray,docs,train}"

phase() { printf '\n==> [%s] %s\n' "$1" "$2"; }

# -- 1. System packages ---------------------------------------------------------------------------
# Mesa EGL/OSMesa: MuJoCo renders offscreen on the CPU (MUJOCO_GL=egl); GL/GLib: opencv (LIBERO);
# tmux: the TUI tests; ffmpeg: torchcodec reads video datasets; chromium + chromium-driver: the
# dashboard and leaderboard browser tests; git: provenance in run records.
APT_PACKAGES=(libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libgles2 libosmesa6 libglib2.0-0 ca-certificates
              tmux ffmpeg chromium chromium-driver git)
if ! command -v python3.11 >/dev/null 2>&1; then
    APT_PACKAGES+=(python3.11 python3.11-venv)
elif ! python3.11 -c 'import ensurepip' >/dev/null 2>&1; then
    APT_PACKAGES+=(python3.11-venv)
fi
phase 1/5 "system packages"
if [ "$SYSTEM" = 0 ]; then
    echo "skipped (--no-system); the default tests need: ${APT_PACKAGES[*]}"
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here: install the equivalents of: ${APT_PACKAGES[*]}"
else
    MISSING=()
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || MISSING+=("$pkg")
    done
    if [ ${#MISSING[@]} -eq 0 ]; then
        echo "all present: ${APT_PACKAGES[*]}"
    else
        SUDO=""
        if [ "$(id -u)" -ne 0 ]; then
            command -v sudo >/dev/null 2>&1 || { echo "not root and no sudo: install ${MISSING[*]} as root, or pass --no-system" >&2; exit 1; }
            SUDO="sudo"
        fi
        echo "installing: ${MISSING[*]}"
        $SUDO apt-get update -q
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${MISSING[@]}"
    fi
fi

# -- 2. Python 3.11 virtualenv ----------------------------------------------------------------------
phase 2/5 "Python 3.11 virtualenv ($VENV)"
if [ -x "$VENV/bin/python" ]; then
    echo "using $VENV"
else
    BASE_PY="${PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
    [ -n "$BASE_PY" ] || { echo "no python3.11 found: install Python 3.11 (apt: python3.11 python3.11-venv)" >&2; exit 1; }
    "$BASE_PY" -m venv "$VENV"
    echo "created $VENV with $BASE_PY"
fi
PY="$VENV/bin/python"
"$PY" - <<'PYCHECK'
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit(f"rpent needs Python 3.11; {sys.executable} is {sys.version.split()[0]}: "
             "remove that virtualenv or pass --venv DIR of a Python 3.11 one")
PYCHECK
"$PY" -m pip install -q --upgrade "pip>=23.2"

# -- 3. PyTorch (CPU build, pinned) -----------------------------------------------------------------
phase 3/5 "torch 2.13.0"
# torch first, pinned, so the resolver never pulls a different (CUDA, multi-GB) build.
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.__version__.split("+")[0] == "2.13.0" else 1)' 2>/dev/null; then
    echo "present"
else
    "$PY" -m pip install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==2.13.0"
fi

# -- 4. rpent and its extras ------------------------------------------------------------------------
phase 4/5 "rpent (editable) with extras [$EXTRAS] and lerobot 0.4.4"
# Skipped when this tree's pyproject.toml and extras were installed into this venv already (a stamp in the venv).
STAMP="$VENV/.rpent-install-stamp"
WANT="$(cat pyproject.toml | sha256sum | cut -d' ' -f1) $EXTRAS $PWD"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && \
   "$PY" -c 'import os, sys, rpent; sys.exit(0 if os.path.dirname(os.path.dirname(rpent.__file__)) == os.getcwd() else 1)' 2>/dev/null; then
    echo "present (pyproject.toml unchanged since the last install)"
else
    "$PY" -m pip install -q -e ".[$EXTRAS]"
    echo "$WANT" > "$STAMP"
fi
# lerobot 0.4.4 (LeRobot v3.0 datasets and policies) pins torch<2.11; its code runs on torch 2.13.0, so it
# goes in without its own dependency pins (the flywheel and train extras list what it needs).
if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("lerobot") == "0.4.4" else 1)' 2>/dev/null; then
    "$PY" -m pip install -q --no-deps "lerobot==0.4.4"
fi
"$PY" -c 'import rpent.rpc, rpent.services, rpent_tui; print("rpent installed:", rpent.__file__)'

# -- 5. The Meta-World environment --------------------------------------------------------------------
phase 5/5 "Meta-World environment (.venv-metaworld)"
if [ "$METAWORLD" = 0 ]; then
    echo "skipped (--no-metaworld); the Meta-World tests will skip"
else
    PYTHON="$("$PY" -c 'import sys; print(sys._base_executable)')" scripts/install_metaworld.sh
fi

printf '\nrpent is set up. Next:\n  . %s/bin/activate\n  rpent --robot libero --suite libero_object --task 0 --seed 0 --planner scripted\n  python -m pytest -q\n' "$VENV"
