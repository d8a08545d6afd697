"""The leaderboard page in a real headless Chromium (Debian's chromium + chromedriver, selenium), opened
from disk with the network cut off (a proxy that does not exist): it renders without errors, a column
sorts both ways, an arm's drill-down opens and shows its suites and cells, a cell's link opens its
run record, and the pairwise panel shows the Fisher / CMH results. Screenshots go to ``tmp_path``
(``RPENT_LEADERBOARD_SCREENSHOTS=screenshots`` writes ``screenshots/leaderboard*.png`` instead)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from board_records import prepare_board_root
from page_browser import arm_body, available, open_arm, start_browser

pytestmark = pytest.mark.skipif(not available(), reason="needs Debian's chromium and chromium-driver")

REPO = Path(__file__).resolve().parents[2]


def _names(driver):
    from selenium.webdriver.common.by import By

    return [b.find_element(By.CSS_SELECTOR, "tr.main td:nth-child(2) strong").text
            for b in driver.find_elements(By.CSS_SELECTOR, "#leaderboard > tbody")]


@pytest.mark.timeout(300)
def test_page_sorts_drills_down_follows_a_record_link_and_compares(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    prepare_board_root(tmp_path / "lb")
    page = tmp_path / "site" / "leaderboard.html"
    done = subprocess.run([sys.executable, "-m", "rpent.cli.batch", "leaderboard", str(tmp_path / "lb"), "--published",
                           str(REPO / "experiments" / "published" / "rpent_libero_pro.yaml"), "--output", str(page)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    shots = Path(os.environ.get("RPENT_LEADERBOARD_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    driver = start_browser()
    try:
        driver.get(page.as_uri())
        assert driver.title == "Leaderboard"
        ranked = _names(driver)
        assert ranked[0] == "GPT-6 Astra (low reasoning)" and ranked[-1] == "Pi0.5 alone" and len(ranked) == 9
        driver.save_screenshot(str(shots / "leaderboard.png"))
        # sort by the k/N column (numbers of successes): largest first, then smallest first
        head = driver.find_element(By.XPATH, "//table[@id='leaderboard']/thead//th[normalize-space()='k/N']")
        head.click()
        desc = _names(driver)
        assert head.get_attribute("aria-sort") == "descending"
        assert desc[:2] == ["GPT-6 Astra (low reasoning)", "Claude Opus 4.7"] and desc[-3:] == ["scripted", "llm", "flash"]
        head.click()
        asc = _names(driver)
        assert head.get_attribute("aria-sort") == "ascending" and asc == desc[::-1]
        # text column: arm names A-Z
        name_head = driver.find_element(By.XPATH, "//table[@id='leaderboard']/thead//th[normalize-space()='arm']")
        name_head.click()
        assert _names(driver) == sorted(asc, key=str.lower) or _names(driver) == sorted(asc)
        # drill-down of the flash arm: per-suite rows, then a suite's cells by task
        body = arm_body(driver, "flash")
        detail = body.find_element(By.CSS_SELECTOR, "tr.detail")
        assert not detail.is_displayed()
        open_arm(driver, "flash", "libero_goal_swap")
        assert detail.is_displayed()
        suites = [r.get_attribute("data-suite") for r in detail.find_elements(By.CSS_SELECTOR, "table.suites tbody tr")]
        assert suites == ["libero_object_task", "libero_goal_swap"]
        cells = detail.find_elements(By.CSS_SELECTOR, "details.suite[data-suite='libero_goal_swap'] a.cell")
        assert [c.text for c in cells] == ["1", "2", "3", "1", "2", "3"]
        assert "st-notrun" in cells[3].get_attribute("class") and "not run" in cells[3].get_attribute("title")
        driver.execute_script("arguments[0].scrollIntoView()", body)
        driver.save_screenshot(str(shots / "leaderboard_drilldown.png"))
        # follow a record link: the cell's transcript opens from disk
        first = cells[0]
        key = first.get_attribute("data-key")
        assert key == "flash/libero_goal_swap/t0/s1/r0"
        first.click()
        doc = json.loads(driver.find_element(By.TAG_NAME, "body").text)
        assert (doc["suite"], doc["task"], doc["seed"], doc["environment_success"]) == ("libero_goal_swap", 0, 1, True)
        assert driver.current_url.endswith("/runs/flash/libero_goal_swap_t0_s1_r0/attempt-1/"
                                           "transcript_goal_swap_t0_s1.json")
        driver.back()
        # pairwise panel: scripted vs flash (records: CMH over tasks), then a published row (pooled Fisher)
        Select(driver.find_element(By.ID, "arm-a")).select_by_visible_text("scripted")
        Select(driver.find_element(By.ID, "arm-b")).select_by_visible_text("flash")
        out = driver.find_element(By.ID, "compare-out")
        assert "CMH p" in out.text and "12/16 (75.0%)" in out.text and "8/12 (66.7%)" in out.text
        assert "libero_goal_swap" in out.text and "no significant difference" in out.text
        driver.execute_script("document.getElementById('compare').scrollIntoView()")
        driver.save_screenshot(str(shots / "leaderboard_compare.png"))
        Select(driver.find_element(By.ID, "arm-b")).select_by_visible_text("GPT-6 Astra (low reasoning) (published)")
        assert "pooled Fisher exact test only" in out.text and "741/800" in out.text
        # swapping A and B flips the difference's sign
        Select(driver.find_element(By.ID, "arm-a")).select_by_visible_text("flash")
        Select(driver.find_element(By.ID, "arm-b")).select_by_visible_text("scripted")
        assert "+8.3" in out.text
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
    finally:
        driver.quit()
