"""Dashboard F8 in a real headless Chromium: the latest camera frames of the current TaskRun download
through the browser as PNG files, byte-identical to the frames the session holds.

Fast (no simulator): the session server runs in this process with the TUI tests' ``run_task``
stand-in (it starts a real tiny env server and emits real PNG frames); the dashboard is the real
textual-serve server (``rpent_tui.dashboard.make_server``) in a subprocess, whose tab runs the real
``python -m rpent_tui.attached`` client over the session's Unix socket.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser_helpers import available, screen_text, send_keys, start_browser, wait_text
from rpent.session.client import RemoteSession
from rpent.session.layout import SessionPaths
from rpent.session.server import SessionServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not available(), reason="needs chromium and chromium-driver: run scripts/install.sh (apt: chromium chromium-driver)")

SERVE = ("import sys; from rpent_tui.dashboard import dashboard_command, make_server; "
         "make_server(dashboard_command(sys.argv[1]), '127.0.0.1', int(sys.argv[2]), None, 'rpent test').serve()")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_f8_downloads_the_current_frames_in_chromium(short_tmp, tmp_path, png_bytes):
    from test_attached_app import ServerThread
    from tui_helpers import StandInRun, plain_run_config

    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    root = short_tmp / "s"
    paths = SessionPaths(root)
    token = paths.make_token()

    def make(sink):
        return Session(SessionConfig(output_dir=root, planner="scripted", shared_services=()), sink,
                       run_task=StandInRun(png=png_bytes), shared_specs=[], make_run_config=plain_run_config)

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    port = free_port()
    driver = dash = None
    with ServerThread(SessionServer(paths, make, token)) as thread:
        try:
            client = RemoteSession(paths, lambda e: None)
            deadline = time.monotonic() + 30
            while client.call("status")["session_state"] != "ready":
                assert time.monotonic() < deadline, "session never ready"
                time.sleep(0.1)
            run = client.call("start_task", {"suite": "libero_object", "task": 0, "seed": 0})
            client.close()
            session = thread.server.session
            deadline = time.monotonic() + 60
            while not session.runs[0].finished:
                assert time.monotonic() < deadline, "TaskRun never finished"
                time.sleep(0.1)
            assert session.runs[0].frames == {"main": png_bytes, "wrist": png_bytes}
            dash = subprocess.Popen([sys.executable, "-c", SERVE, str(root), str(port)], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ})
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert dash.poll() is None, dash.stdout.read()
                    assert time.monotonic() < deadline, "the dashboard never listened"
                    time.sleep(0.2)
            driver = start_browser(str(downloads))
            driver.get(f"http://127.0.0.1:{port}/")
            wait_text(driver, f"TaskRun {run['id']} succeeded", 90)
            from selenium.webdriver.common.keys import Keys

            names = {f"{run['id']}_main_step0.png", f"{run['id']}_wrist_step0.png"}
            deadline = time.monotonic() + 120
            pressed = started = time.monotonic() - 15
            reloaded = False
            while time.monotonic() < deadline:
                done = {p.name for p in downloads.iterdir()}
                if names <= done and not any(n.endswith(".crdownload") for n in done):
                    break
                if not (names & done) and not reloaded and time.monotonic() - started > 60:
                    # a browser session whose deliveries stall (the app says "delivering", no file
                    # comes; Textual's delivery to the page, not rpent's): a reloaded page is a new
                    # client, as a user would open, and F8 must work there
                    driver.get(f"http://127.0.0.1:{port}/")
                    wait_text(driver, f"TaskRun {run['id']} succeeded", 60)
                    reloaded, pressed = True, time.monotonic() - 15
                if not (names & done) and time.monotonic() - pressed > 15:  # again if a loaded machine lost the key
                    send_keys(driver, Keys.F8)
                    pressed = time.monotonic()
                time.sleep(0.3)
            got = sorted(p.name for p in downloads.iterdir())
            assert names <= set(got), f"downloads: {got}; screen: {screen_text(driver)[-1500:]!r}"
            assert (downloads / f"{run['id']}_main_step0.png").read_bytes() == png_bytes
            assert (downloads / f"{run['id']}_wrist_step0.png").read_bytes() == png_bytes
        finally:
            if driver is not None:
                driver.quit()
            if dash is not None:
                dash.terminate()
                try:
                    dash.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    dash.kill()
                    dash.wait()
    assert thread.server.status == "stopped"
