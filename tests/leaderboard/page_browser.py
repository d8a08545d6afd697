"""A real headless Chromium (Debian's ``/usr/bin/chromium`` + ``/usr/bin/chromedriver``, selenium) for the
leaderboard page, and a screenshot command::

    python tests/leaderboard/page_browser.py PAGE.html OUT.png [--open ARM] [--suite SUITE] [--compare A B]

(``--open`` expands an arm's drill-down and, with ``--suite``, that suite's cells; ``--compare`` picks the
pairwise panel's rows and scrolls to it.)
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def available() -> bool:
    """True when Debian's chromium and chromedriver are installed."""
    return shutil.which(CHROMIUM) is not None and shutil.which(CHROMEDRIVER) is not None


def start_browser(width: int = 1500, height: int = 1000):
    """A headless Chromium without network access to anything but file:// pages."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                "--disable-gpu", "--allow-file-access-from-files", "--proxy-server=127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def arm_body(driver, name: str):
    """The ``<tbody>`` of the row named ``name``."""
    from selenium.webdriver.common.by import By

    for body in driver.find_elements(By.CSS_SELECTOR, "#leaderboard > tbody"):
        if body.find_element(By.CSS_SELECTOR, "tr.main td:nth-child(2) strong").text == name:
            return body
    raise AssertionError(f"no row {name!r} on the page")


def open_arm(driver, name: str, suite: str | None = None) -> None:
    """Open an arm's drill-down (and one suite's cells)."""
    from selenium.webdriver.common.by import By

    body = arm_body(driver, name)
    body.find_element(By.CSS_SELECTOR, "button.toggle").click()
    if suite:
        details = body.find_element(By.CSS_SELECTOR, f"details.suite[data-suite='{suite}']")
        details.find_element(By.TAG_NAME, "summary").click()
    time.sleep(0.2)


def main() -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("out")
    ap.add_argument("--open", default=None)
    ap.add_argument("--suite", default=None)
    ap.add_argument("--compare", nargs=2, default=None)
    ap.add_argument("--height", type=int, default=1000)
    args = ap.parse_args()
    driver = start_browser(height=args.height)
    try:
        driver.get(Path(args.page).resolve().as_uri())
        if args.open:
            open_arm(driver, args.open, args.suite)
            driver.execute_script("arguments[0].scrollIntoView()", arm_body(driver, args.open))
        if args.compare:
            Select(driver.find_element(By.ID, "arm-a")).select_by_visible_text(args.compare[0])
            Select(driver.find_element(By.ID, "arm-b")).select_by_visible_text(args.compare[1])
            driver.execute_script("document.getElementById('compare').scrollIntoView()")
        time.sleep(0.3)
        driver.save_screenshot(args.out)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
