"""``rpent-batch leaderboard`` on prepared records: the figures per arm and per suite, label vs
environment success, the not-run flash cells, links to records, published rows, the pairwise
panel's tests against scipy, the Markdown table, a page that needs no network, and bad input."""

import json
import re
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from scipy.stats import fisher_exact

from board_records import prepare_board_root

REPO = Path(__file__).resolve().parents[2]
PUBLISHED = REPO / "experiments" / "published" / "rpent_libero_pro.yaml"


def _lb(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rpent.cli.batch", "leaderboard", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def board_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("lb")
    prepare_board_root(out / "lb")
    done = _lb(out / "lb", "--published", PUBLISHED, "--output", out / "site" / "index.html",
               "--markdown", out / "site" / "lb.md", "--json", out / "site" / "lb.json")
    assert done.returncode == 0, done.stderr
    return out


def _rows(board_dir):
    doc = json.loads((board_dir / "site" / "lb.json").read_text())
    return doc, {r["name"]: r for r in doc["rows"]}


def test_rows_count_cells_once_with_wilson_intervals(board_dir):
    doc, rows = _rows(board_dir)
    s, f, llm = rows["scripted"], rows["flash"], rows["llm"]
    assert (s["overall"]["k"], s["overall"]["n"]) == (12, 16)
    assert s["suites"]["libero_object_task"]["k"] == 8 and s["suites"]["libero_goal_swap"]["k"] == 4
    assert s["overall"]["wilson_low"] == pytest.approx(0.505, abs=1e-3)
    # flash: seeds 1-3 only; goal_swap task 1 had no plan: 3 failures decided without a run
    assert (f["overall"]["k"], f["overall"]["n"], f["not_run"], f["seeds"]) == (8, 12, 3, "1-3")
    not_run = [c for t in f["tasks"] for c in t["cells"] if c["not_run"]]
    assert len(not_run) == 3 and all(c["reason"].startswith("flash_plan_missing") for c in not_run)
    assert all(c["links"]["not_run"] and not c["links"]["transcript"] for c in not_run)
    # wall: median over cells that ran (12.0 + seed: 13, 14, 15), p90 with numpy's linear rule
    assert f["overall"]["median_wall_s"] == 14.0 and f["p90_wall_s"] == pytest.approx(15.0)
    # label vs environment success (operator verdicts on two llm cells, both disagreeing)
    assert llm["label"] == {"n": 16, "label_k": 10, "env_k": 10, "verdicts": 2, "disagreements": 2}
    assert s["label"] is None
    assert llm["overall"]["cost_usd_per_episode"] == pytest.approx((200_000 * 3 + 30_000 * 15) / 1e6)
    assert doc["suites"] == ["libero_object_task", "libero_goal_swap"]


def test_cell_links_point_at_the_records(board_dir):
    _, rows = _rows(board_dir)
    page_dir = board_dir / "site"
    cells = [c for t in rows["scripted"]["tasks"] for c in t["cells"]]
    assert len(cells) == 16
    for c in cells:
        transcript = (page_dir / c["links"]["transcript"]).resolve()
        assert transcript.is_file() and transcript.name.startswith("transcript_")
        assert json.loads(transcript.read_text())["seed"] == c["seed"]
        assert (page_dir / c["links"]["video"]).resolve().name == "episode.mp4"
        assert not Path(c["links"]["transcript"]).is_absolute()


def test_published_rows_are_marked_and_compared_pooled(board_dir):
    doc, rows = _rows(board_dir)
    astra = rows["GPT-6 Astra (low reasoning)"]
    assert astra["kind"] == "published" and (astra["overall"]["k"], astra["overall"]["n"]) == (741, 800)
    assert astra["wall_s_per_episode"] == 412 and astra["overall"]["tokens_out_per_episode"] == 3_360_000
    assert rows["Claude Opus 4.7"]["k_derived"] and rows["Claude Opus 4.7"]["rate_published"] == "82.4 %"
    pair = doc["pairs"][f"{rows['scripted']['id']}|{astra['id']}"]
    assert pair["kind"] == "pooled"
    assert pair["overall"]["p_fisher_pooled"] == pytest.approx(fisher_exact([[12, 4], [741, 59]]).pvalue)
    assert not any(k for k in doc["pairs"] if k.startswith("p") and k.split("|")[1].startswith("p"))


def test_pairs_of_arms_run_here_use_fisher_and_cmh(board_dir):
    doc, rows = _rows(board_dir)
    pair = doc["pairs"][f"{rows['scripted']['id']}|{rows['flash']['id']}"]
    assert pair["kind"] == "records"
    o = pair["overall"]
    assert (o["a"]["k"], o["a"]["n"], o["b"]["k"], o["b"]["n"]) == (12, 16, 8, 12)
    assert o["p_fisher_pooled"] == pytest.approx(fisher_exact([[12, 4], [8, 4]]).pvalue)
    goal = next(s for s in pair["suites"] if s["suite"] == "libero_goal_swap")
    assert (goal["a_k"], goal["a_n"], goal["b_k"], goal["b_n"]) == (4, 8, 3, 6)
    assert goal["p_fisher"] == pytest.approx(fisher_exact([[4, 4], [3, 3]]).pvalue)
    assert len(pair["rows"]) == 4 and all("p_adjusted" in r for r in pair["rows"])


def test_markdown_table(board_dir):
    md = (board_dir / "site" / "lb.md").read_text()
    assert "| scripted | scripted | 12/16 | 75.0% | [50.5, 89.8] | 8/8 100% | 4/8 50% |" in md
    assert "published, not rerun here ([RPent (RLinf/RPent), published LIBERO-PRO leaderboard]" \
           "(https://github.com/RLinf/RPent))" in md
    assert "3 cells without a flash plan counted as failures" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [ln.split(" | ")[1] for ln in lines[:2]] == ["GPT-6 Astra (low reasoning)", "Claude Opus 4.7"]
    assert len(lines) == 9


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v is not None:
                self.refs.append((tag, k, v))


def test_page_is_self_contained(board_dir):
    html = (board_dir / "site" / "index.html").read_text()
    p = _Refs()
    p.feed(html)
    assert "link" not in p.tags and "img" not in p.tags
    assert not [r for r in p.refs if r[1] == "src"]  # no external script, style or image
    external = {v for _, _, v in p.refs if re.match(r"^[a-z]+:", v)}
    assert external == {"https://github.com/RLinf/RPent"}  # only the published rows' source link
    text = unescape(html)
    assert "simulator's state and its oracle segmentation" in text and "expert baseline" in text
    assert html.count('class="badge">published, not rerun here') == 6


def test_bad_input_is_one_line(tmp_path, board_dir):
    done = _lb(tmp_path / "nothing")
    assert done.returncode == 2 and "is not an rpent-batch results root (no matrix.json)" in done.stderr
    bad = tmp_path / "pub.yaml"
    bad.write_text("schema: rpent.leaderboard.published/1\nsource: x\nrows:\n  - {name: a, n: 10, k: 11}\n")
    done = _lb(board_dir / "lb", "--published", bad, "--output", tmp_path / "x.html")
    assert done.returncode == 2 and "row 'a': k = 11 is more than n = 10" in done.stderr
    done = _lb(board_dir / "lb", board_dir / "lb", "--output", tmp_path / "y.html")
    assert done.returncode == 2 and "is given twice" in done.stderr
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "y.html").exists()
    # a file that cannot be written is named by its own flag
    done = _lb(board_dir / "lb", "--output", tmp_path / "z.html", "--json", "/proc/rpent-nope/lb.json")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "rpent-batch leaderboard: error: cannot write --json /proc/rpent-nope/lb.json: No such file or directory; "
        "choose another --json"), done.stderr
    done = _lb(board_dir / "lb", "--output", "/proc/rpent-nope/lb.html")
    assert done.returncode == 2 and "cannot write --output /proc/rpent-nope/lb.html: " in done.stderr, done.stderr
