"""`rpent doctor`: the real CLI in a subprocess, on this machine's real EGL, LIBERO, tmux, Ray and disk.

Each probe's status is checked against facts the test finds itself (which programs are on PATH,
which environment variables it set, which files it wrote); EGL is made unavailable the way a host
without a usable EGL vendor library is (``__EGL_VENDOR_LIBRARY_FILENAMES`` naming no vendor file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RPENT = [sys.executable, "-m", "rpent.cli.main"]
REQUIRED = {"python", "rendering", "egl_device", "libero", "disk", "checkpoints"}
ALL = REQUIRED | {"gpu", "providers", "tui", "chromium", "ray", "metaworld"}
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY",
                 "CODEX_BASE_URL")
CHECKPOINT_VARS = ("PI05_CHECKPOINT_PATH", "APXINF_PI05_MODEL_DIR", "SAM3_CHECKPOINT_PATH")


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in PROVIDER_VARS + CHECKPOINT_VARS + ("MUJOCO_EGL_DEVICE_ID", "CUDA_VISIBLE_DEVICES",
                                                          "__EGL_VENDOR_LIBRARY_FILENAMES")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def _doctor(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(RPENT + ["doctor", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _json(*args: str, env: dict, cwd: Path) -> tuple[int, dict]:
    p = _doctor("--json", *args, env=env, cwd=cwd)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads(p.stdout)
    assert report["exit_code"] == p.returncode
    return p.returncode, {c["name"]: c for c in report["checks"]}


def test_json_reports_every_probe_with_the_status_this_machine_warrants(tmp_path):
    secret = "sk-doctor-test-7f3a9c"
    env = _env(COLORTERM="truecolor", ANTHROPIC_API_KEY=secret, RPENT_METAWORLD_PYTHON=str(tmp_path / "no_python"))
    code, checks = _json("--logs-dir", str(tmp_path / "a" / "b" / "logs"), env=env, cwd=tmp_path)
    assert set(checks) == ALL
    for c in checks.values():
        assert c["status"] in ("ok", "warn", "fail", "skip") and c["summary"], c
        assert c["required"] is (c["name"] in REQUIRED), c
        assert (c["status"] == "ok") or c["fix"], c  # anything not ok names its fix
    # the main job's needs, all present on a machine set up by scripts/install.sh
    for name in REQUIRED:
        assert checks[name]["status"] == "ok", checks[name]
    assert code == 0
    assert checks["python"]["details"]["python"].startswith("3.11.")
    render = checks["rendering"]["details"]
    assert render["ok"] is True and render["shape"] == [32, 32, 3] and render["mean"] > 0
    assert checks["libero"]["details"]["libero_object_ready_tasks"] == 10
    disk = checks["disk"]["details"]
    assert disk["logs_dir"] == str(tmp_path / "a" / "b" / "logs") and disk["measured_at"] == str(tmp_path)
    assert checks["checkpoints"]["summary"].startswith("no checkpoint variable set")
    # optional parts: the status follows what is there
    assert checks["tui"]["status"] == ("ok" if shutil.which("tmux") else "warn")
    has_chromium = shutil.which("chromedriver") and any(map(shutil.which, ("chromium", "chromium-browser",
                                                                          "google-chrome")))
    assert checks["chromium"]["status"] == ("ok" if has_chromium else "warn")
    assert checks["metaworld"]["status"] == "warn" and "install_metaworld.sh" in checks["metaworld"]["fix"]
    try:
        import ray  # noqa: F401
        has_ray = True
    except ImportError:
        has_ray = False
    assert checks["ray"]["status"] == ("ok" if has_ray else "warn")
    assert checks["gpu"]["status"] == "ok"
    assert (checks["gpu"]["details"].get("gpus") is None) == (shutil.which("nvidia-smi") is None)
    # provider keys: the name, never the value
    providers = checks["providers"]
    assert "ANTHROPIC_API_KEY" in providers["details"]["set"] and "OPENAI_API_KEY" not in providers["details"]["set"]
    assert "claude_code" in providers["details"]["planners_with_key"]


def test_no_secret_value_in_any_output(tmp_path):
    secret = "sk-doctor-test-secret-41b2"
    env = _env(OPENAI_API_KEY=secret, CODEX_API_KEY=secret + "x", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    text = _doctor(env=env, cwd=tmp_path)
    js = _doctor("--json", env=env, cwd=tmp_path)
    for p in (text, js):
        assert secret not in p.stdout + p.stderr
    assert "OPENAI_API_KEY" in text.stdout and "CODEX_API_KEY" in text.stdout


def test_egl_unavailable_fails_with_the_named_fix(tmp_path):
    env = _env(__EGL_VENDOR_LIBRARY_FILENAMES=str(tmp_path / "no_vendor.json"))
    code, checks = _json(env=env, cwd=tmp_path)
    assert code == 1
    render = checks["rendering"]
    assert render["status"] == "fail" and "could not render through EGL" in render["summary"]
    assert "apt-get install libegl1 libegl-mesa0" in render["fix"]
    assert "__EGL_VENDOR_LIBRARY_FILENAMES" in render["fix"]  # names what sent EGL away
    assert checks["egl_device"]["status"] == "fail"
    # the other checks still ran and the main job's other needs are fine
    assert checks["libero"]["status"] == "ok" and checks["python"]["status"] == "ok"
    text = _doctor(env=env, cwd=tmp_path)
    assert text.returncode == 1
    line = next(x for x in text.stdout.splitlines() if x.split()[:2] == ["FAIL", "rendering"])
    assert "fix: install Mesa's EGL" in line
    assert "the main job cannot run: fix rendering, egl_device" in text.stdout


def test_egl_device_variable_outside_the_devices_fails_naming_the_range(tmp_path):
    code, checks = _json(env=_env(MUJOCO_EGL_DEVICE_ID="7"), cwd=tmp_path)
    assert code == 1
    dev = checks["egl_device"]
    assert dev["status"] == "fail" and "MUJOCO_EGL_DEVICE_ID=7" in dev["summary"]
    assert "set MUJOCO_EGL_DEVICE_ID in 0.." in dev["fix"]
    assert checks["rendering"]["status"] == "ok"  # EGL itself works; only the device choice is wrong


def test_checkpoint_layout_ok_and_miss(tmp_path):
    import torch

    from rpent.models.pi05.tiny import build_tiny_checkpoint

    good = build_tiny_checkpoint(tmp_path / "pi05")
    sam3 = tmp_path / "sam3.pt"
    torch.save({"w": torch.zeros(256, 256)}, sam3)
    code, checks = _json(env=_env(PI05_CHECKPOINT_PATH=str(good), SAM3_CHECKPOINT_PATH=str(sam3)), cwd=tmp_path)
    ck = checks["checkpoints"]
    assert code == 0 and ck["status"] == "ok", ck
    assert ck["summary"] == "PI05_CHECKPOINT_PATH complete; SAM3_CHECKPOINT_PATH complete"
    assert all(line.startswith("OK") for line in ck["details"]["PI05_CHECKPOINT_PATH"]["files"])

    incomplete = build_tiny_checkpoint(tmp_path / "pi05_no_stats", with_norm_stats=False)
    cut = tmp_path / "sam3_cut.pt"
    cut.write_bytes(sam3.read_bytes()[: sam3.stat().st_size // 2])
    code, checks = _json(env=_env(PI05_CHECKPOINT_PATH=str(incomplete), SAM3_CHECKPOINT_PATH=str(cut)), cwd=tmp_path)
    ck = checks["checkpoints"]
    assert code == 1 and ck["status"] == "fail"
    assert f"PI05_CHECKPOINT_PATH={incomplete} misses norm_stats.json" in ck["summary"]
    assert str(cut) in ck["summary"]
    assert any(line.startswith("MISS norm_stats.json") for line in ck["details"]["PI05_CHECKPOINT_PATH"]["files"])


def test_doctor_is_a_subcommand_that_leaves_the_run_flags_alone(tmp_path):
    env = _env()
    help_ = _doctor("--help", env=env, cwd=tmp_path)
    assert help_.returncode == 0 and "--json" in help_.stdout and "--ray" in help_.stdout
    bad = _doctor("--timeout-s", "0", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "--timeout-s must be > 0" in bad.stderr
    main_help = subprocess.run(RPENT + ["--help"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert main_help.returncode == 0 and "rpent doctor" in main_help.stdout and "--suite" in main_help.stdout
    missing = subprocess.run(RPENT + ["--suite", "libero_object"], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=120)
    assert missing.returncode == 2 and "--suite and --task are required" in missing.stderr


@pytest.mark.slow
def test_ray_flag_starts_and_stops_a_local_cluster(tmp_path):
    pytest.importorskip("ray")
    code, checks = _json("--ray", env=_env(), cwd=tmp_path)
    ray = checks["ray"]
    assert ray["status"] == "ok", ray
    assert ray["details"]["start_s"] > 0 and ray["details"]["address"]
    assert "started" in ray["summary"] and "stopped" in ray["summary"]
