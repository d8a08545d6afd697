"""``rpent --dashboard`` in a real headless Chromium: the page attaches to the session process,
``/rpent-task libero_object 0 0`` runs with the scripted planner on the real LIBERO simulator and
the transcript reaches success; ``episode.mp4`` downloads through the browser; a second tab sees the
same TaskRun; closing the tabs and the dashboard leaves the session running; the run record is
checked on disk. Screenshot: ``screenshots/dashboard_run.png`` (set ``RPENT_DASHBOARD_SCREENSHOT``
to write it elsewhere). A non-loopback bind without a token is refused; with a token, a browser
without it gets 401.

Slow (~1-3 min: a MuJoCo env server and a browser): ``pytest -m slow tests/session/test_dashboard_browser.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from browser_helpers import available, screen_text, send_keys, start_browser, wait_text
from rpent.session.layout import SessionPaths, pid_alive

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not available(), reason="needs chromium and chromium-driver: run scripts/install.sh (apt: chromium chromium-driver)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(out: Path, port: int, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rpent.cli.main", "--robot", "libero", "--dashboard",
                             "--dashboard-port", str(port), "--planner", "scripted", "--output-dir", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, "MUJOCO_GL": "egl", **(env or {})})


def wait_line(proc: subprocess.Popen, needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not printed; output:\n{''.join(seen)}")


def test_non_loopback_dashboard_needs_a_token(short_tmp):
    proc = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--dashboard", "--dashboard-host", "0.0.0.0",
                           "--planner", "scripted", "--output-dir", str(short_tmp / "s")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "RPENT_DASHBOARD_TOKEN": ""})
    assert proc.returncode == 2 and "is not loopback: set a token" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--dashboard", "--env-endpoint", "http://127.0.0.1:1",
                           "--planner", "scripted", "--output-dir", str(short_tmp / "s")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Dashboard task control cannot use --env-endpoint because each TaskRun requires a fresh owned env_server" \
        in proc.stderr
    assert not (short_tmp / "s").exists()  # refused before anything started


def step(what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


@pytest.mark.slow
@pytest.mark.timeout(900)  # a loaded 2-core machine runs the MuJoCo task several times slower
def test_dashboard_in_chromium_runs_a_task_to_success(short_tmp, tmp_path):
    out = short_tmp / "dash"
    port = free_port()
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    token = "t0k3n-for-the-test"
    dash = start_dashboard(out, port, "--dashboard-host", "0.0.0.0", env={"RPENT_DASHBOARD_TOKEN": token})
    driver = second = None
    paths = SessionPaths(out)
    try:
        wait_line(dash, "dashboard on", 90)
        deadline = time.monotonic() + 30
        while True:  # on_startup prints before the socket is bound
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the dashboard never listened"
                time.sleep(0.2)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert refused.value.code == 401
        step('driver = start_browser(str(downloads))')
        driver = start_browser(str(downloads))
        driver.get(f"http://127.0.0.1:{port}/?token={token}")
        wait_text(driver, "session ready", 90)
        time.sleep(1.0)
        from selenium.webdriver.common.keys import Keys

        for attempt in range(5):  # a key can be lost on a loaded machine: focus, clear, retype
            send_keys(driver, "i")
            time.sleep(0.5)
            send_keys(driver, Keys.CONTROL + "u")
            mark = len(screen_text(driver))
            send_keys(driver, "/rpent-task libero_object 0 0")
            try:
                wait_text(driver, "/rpent-task libero_object 0 0", 10, since=mark)
                break
            except AssertionError:
                assert attempt < 4, "could not type the task command"
        for attempt in range(3):  # Enter can be lost on a loaded machine as well
            step('send_keys(driver, Keys.ENTER)')
            send_keys(driver, Keys.ENTER)
            try:
                # the first start waits for the session to load LIBERO's suite tables (slow on a loaded machine)
                wait_text(driver, "Task selected: libero_object task 0 seed 0", 120 if attempt == 0 else 30)
                break
            except AssertionError:
                assert attempt < 2, "the task command was never submitted"
        mark = len(screen_text(driver))
        step('wait_text(driver, "finish", 400, since=m')
        wait_text(driver, "finish", 400, since=mark)
        wait_text(driver, "succeeded", 120, since=mark)
        text = screen_text(driver)
        assert "environment success" in text  # the transcript's finished line
        # a second tab attaches to the same session and shows the finished TaskRun from its backlog
        step('second = start_browser')
        second = start_browser(str(downloads))
        second.get(f"http://127.0.0.1:{port}/?token={token}")
        wait_text(second, "TaskRun 0001 succeeded", 90)
        second.quit()
        second = None
        # the episode video downloads through the browser (shift+F8; F7 is the Batch screen)
        step('send_keys(driver, Keys.SHIFT + Keys.F8)')
        send_keys(driver, Keys.SHIFT + Keys.F8)
        deadline = time.monotonic() + 60
        video = None
        while time.monotonic() < deadline and video is None:
            done = [p for p in downloads.glob("*episode.mp4")]
            video = done[0] if done and not list(downloads.glob("*.crdownload")) else None
            time.sleep(0.5)
        record = out / "tasks" / "0001_libero_object_t0_s0"
        assert video is not None, f"no download; files: {list(downloads.iterdir())}"
        assert video.read_bytes() == (record / "episode.mp4").read_bytes()
        shot = Path(os.environ.get("RPENT_DASHBOARD_SCREENSHOT", ROOT / "screenshots" / "dashboard_run.png"))
        shot.parent.mkdir(parents=True, exist_ok=True)
        time.sleep(1.5)
        step('driver.save_screenshot(str(shot))')
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        taskrun = json.loads((record / "taskrun.json").read_text())
        assert taskrun["state"] == "succeeded" and taskrun["environment_success"] is True
        assert (record / "states.json").is_file()
        transcript = json.loads(next(record.glob("transcript_*.json")).read_text())
        assert transcript["environment_success"] is True
        # closing the tab and the dashboard leaves the session running
        driver.quit()
        driver = None
        step('dash.send_signal(signal.SIGINT)')
        dash.send_signal(signal.SIGINT)
        assert "session dash keeps running" in dash.communicate(timeout=30)[0]
        assert paths.running()
    finally:
        for d in (driver, second):
            if d is not None:
                d.quit()
        if dash.poll() is None:
            dash.kill()
            dash.wait()
        state = paths.read_state() or {}
        if pid_alive(state.get("pid")):
            os.kill(state["pid"], signal.SIGTERM)
            deadline = time.monotonic() + 60
            while pid_alive(state["pid"]) and time.monotonic() < deadline:
                time.sleep(0.2)
    assert not pid_alive(state.get("pid"))
    assert (paths.read_state() or {}).get("status") == "stopped"
