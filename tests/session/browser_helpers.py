"""A real headless Chromium (Debian's ``/usr/bin/chromium`` + ``/usr/bin/chromedriver``) driven by
selenium, with a hook that keeps the text the dashboard's websocket delivers (xterm.js draws on a
canvas, so the page's DOM holds no terminal text)."""

from __future__ import annotations

import re
import shutil
import time

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

#: Installed before any page script: every websocket message (text or binary) is appended, decoded
#: as UTF-8, to ``window.__rpentText`` (the newest 4 MB are kept).
HOOK = r"""
(() => {
  const Native = window.WebSocket;
  window.__rpentText = "";
  const dec = new TextDecoder("utf-8");
  function keep(s) { window.__rpentText = (window.__rpentText + s).slice(-4000000); }
  window.WebSocket = function (url, protocols) {
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    ws.addEventListener("message", (ev) => {
      if (typeof ev.data === "string") { keep(ev.data); }
      else if (ev.data instanceof ArrayBuffer) { keep(dec.decode(new Uint8Array(ev.data))); }
      else if (ev.data && ev.data.arrayBuffer) { ev.data.arrayBuffer().then((b) => keep(dec.decode(new Uint8Array(b)))); }
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();
"""

_ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]|\x1b\][^\x07]*\x07")


def available() -> bool:
    """True when Debian's chromium and chromedriver are installed."""
    return shutil.which(CHROMIUM) is not None and shutil.which(CHROMEDRIVER) is not None


def start_browser(download_dir: str, width: int = 1600, height: int = 1000):
    """A headless Chromium (selenium) that downloads into ``download_dir`` and records websocket text."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                "--disable-gpu", "--use-gl=swiftshader", "--enable-unsafe-swiftshader"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"download.default_directory": download_dir,
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": download_dir})
    return driver


def screen_text(driver) -> str:
    """Everything the terminal received so far, without escape sequences."""
    return _ANSI.sub("", driver.execute_script("return window.__rpentText || ''"))


def wait_text(driver, needle: str, timeout: float, since: int = 0) -> str:
    """Wait until ``needle`` appears in the received text (after offset ``since``)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = screen_text(driver)
        if needle in text[since:]:
            return text
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} not received after {timeout}s; last 2000 chars:\n{text[-2000:]}")


def send_keys(driver, *keys) -> None:
    """Type into the terminal: keys go to xterm.js's hidden textarea (focused first)."""
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.CSS_SELECTOR, "textarea.xterm-helper-textarea")
    driver.execute_script("arguments[0].focus();", box)
    for key in keys:
        box.send_keys(key)
        time.sleep(0.15)
