#!/usr/bin/env bash
# Device side of the GPU evaluation recipe (an H200: Python 3.12, torch 2.11, no package index).
#
# The carry is made here by `python benchmarks/gpu_eval_prepare.py download|trace|pack|stage --carry-dir DIR`
# (DIR: an ignored folder of the checkout the device tool sends). `stage` splits it into per-call folders
# DIR/call1, DIR/call2 (each under the 64 MiB a call carries, the working tree included) and DIR/code
# (this repository's rpent + benchmarks, for when the checkout sent is not this one). One device call each,
# consecutive, so the machine stays warm and keeps what the earlier call left:
#
#   call 1: carry [DIR/call1]            cmd: bash DIR/code/benchmarks/gpu_eval_device.sh stage DIR/call1
#   call 2: carry [DIR/call2, DIR/code, DIR/gl]
#                                        cmd: for f in DIR/gl/*.deb; do dpkg -x $f /; done; ldconfig;
#                                             bash DIR/code/benchmarks/gpu_eval_device.sh stage DIR/call2 &&
#                                             bash DIR/code/benchmarks/gpu_eval_device.sh install &&
#                                             bash DIR/code/benchmarks/gpu_eval_device.sh eval
#
# DIR/gl: the libEGL/libglvnd .debs of the device README (`apt-get download libvulkan1 libegl1 libglvnd0
# libopengl0 libgl1 libglx0 libgles2` for amd64): the image has the NVIDIA EGL driver but no libEGL.so.1.
# (call 1 names DIR/code/... only after call 2 carried it; in call 1 run the copy of this script that the
# checkout itself holds, or `mkdir -p $STATE/parts && cp DIR/call1/* $STATE/parts/`.)
#
# Subcommands:
#   stage SRC   copy SRC's files (sim.tar.gz.part-N, *.whl) into $STATE/parts (kept while the machine is warm)
#   install     join + unpack the simulator parts into $STATE/site and pip-install the wheels there (--no-index)
#   env         print the exports that put $STATE/site on PYTHONPATH (eval "$(... env)")
#   eval [ARGS] run benchmarks/gpu_eval_bench.py (ARGS passed on; output and bench.json under $OUT)
set -euo pipefail
STATE=${GPU_CARRY_STATE:-/root/rpent_gpu_carry}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
cmd=${1:-}
shift || true
case "$cmd" in
  stage)
    mkdir -p "$STATE/parts"
    cp -v "$1"/* "$STATE/parts/"
    du -sh "$STATE/parts"
    ;;
  install)
    mkdir -p "$STATE/site"
    ls "$STATE"/parts/sim.tar.gz.part-* | sort -t- -k3 -n | xargs cat | tar -xz -C "$STATE/site"
    if ls "$STATE"/parts/*.whl >/dev/null 2>&1; then
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$STATE/site" "$STATE"/parts/*.whl
    fi
    du -sh "$STATE/site"
    PYTHONPATH="$STATE/site:$HERE" MUJOCO_GL=egl "$PY" -c "import mujoco, robosuite, libero.libero, numpy; print('simulator stack OK: mujoco', mujoco.__version__, 'numpy', numpy.__version__)"
    ;;
  env)
    echo "export PYTHONPATH=$STATE/site:$HERE\${PYTHONPATH:+:\$PYTHONPATH} MUJOCO_GL=egl PYOPENGL_PLATFORM=egl"
    ;;
  eval)
    export PYTHONPATH="$STATE/site:$HERE${PYTHONPATH:+:$PYTHONPATH}" MUJOCO_GL=egl PYOPENGL_PLATFORM=egl PYTHONUNBUFFERED=1
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    cd "$HERE"
    rm -rf "$STATE/run"  # the 6.7 GB checkpoint and the logs stay off $OUT (it returns 8 files at most)
    rc=0
    "$PY" benchmarks/gpu_eval_bench.py --out "$STATE/run" "$@" || rc=$?
    if [ -n "${OUT:-}" ]; then
      cp "$STATE/run/bench.json" "$OUT/" 2>/dev/null || true
      for d in "$STATE"/run/run_*/; do
        r=$(basename "$d"); r=${r#run_}
        [ -f "$d/eval_stdout.log" ] && cp "$d/eval_stdout.log" "$OUT/eval_$r.log"
      done
    fi
    exit $rc
    ;;
  *)
    echo "usage: $0 stage SRC | install | env | eval [gpu_eval_bench.py args]" >&2
    exit 2
    ;;
esac
