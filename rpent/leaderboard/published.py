"""Published reference rows for the leaderboard: results of other systems as their authors published
them, shown as "published, not rerun here" next to the arms run from records.

File format (YAML)::

    schema: rpent.leaderboard.published/1
    benchmark: LIBERO-PRO _task and _swap suites of the four bases, 10 tasks x 10 seeds (800 episodes)
    source: RPent's published LIBERO-PRO leaderboard        # default source of every row
    url: https://github.com/RLinf/RPent                     # default link of every row
    rows:
      - name: GPT-6 Astra (low reasoning)   # required
        n: 800                              # episodes (required)
        k: 741                              # successes; or rate (a fraction) when only that is published
        rate_published: "92.63 %"           # the figure exactly as published (text, optional)
        k_derived: false                    # true: k was computed from the published rate and n
        wall_s_per_episode: 412             # optional: seconds, tokens and USD per episode
        tokens_out_per_episode: 3360000
        tokens_per_episode: null
        cost_usd_per_episode: null
        note: "..."                         # optional; source / url override the file's defaults

A row with ``k`` gets a Wilson interval; one with only ``rate`` shows the rate alone. Published rows
have no per-task counts, so the pairwise panel compares them by a pooled Fisher test only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["PublishedError", "load_published", "PUBLISHED_SCHEMA", "ROW_KEYS"]

PUBLISHED_SCHEMA = "rpent.leaderboard.published/1"
ROW_KEYS = ("name", "n", "k", "rate", "rate_published", "k_derived", "wall_s_per_episode", "tokens_out_per_episode",
            "tokens_per_episode", "cost_usd_per_episode", "note", "source", "url", "planner", "model")


class PublishedError(ValueError):
    """A published-rows file is unreadable or malformed (the message names the file, the row and the fix)."""


def _number(v: Any, what: str, *, integer: bool = False) -> float | int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise PublishedError(f"{what} must be {'an integer' if integer else 'a number'}, got {v!r}")
    if v < 0:
        raise PublishedError(f"{what} must be >= 0, got {v!r}")
    return v


def load_published(path: str | Path) -> dict[str, Any]:
    """Read and check a published-rows file.

    Returns:
        ``{"path" (as given), "benchmark", "source", "url", "rows": [{"name", "n", "k" | None, "rate" (fraction),
        "rate_published", "k_derived", "wall_s_per_episode", "tokens_out_per_episode",
        "tokens_per_episode", "cost_usd_per_episode", "note", "source", "url", "planner", "model"}]}``.
    Raises:
        PublishedError: the file is missing, not YAML, or a row is malformed.
    """
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PublishedError(f"published rows file {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishedError(f"published rows file {p} cannot be read ({exc})") from None
    except yaml.YAMLError as exc:
        raise PublishedError(f"published rows file {p} is not valid YAML ({str(exc).splitlines()[0]}); fix it") from None
    if not isinstance(doc, dict) or doc.get("schema") != PUBLISHED_SCHEMA:
        raise PublishedError(f"{p} is not a published rows file: it needs 'schema: {PUBLISHED_SCHEMA}' and 'rows:'")
    rows_in = doc.get("rows")
    if not isinstance(rows_in, list) or not rows_in:
        raise PublishedError(f"{p}: 'rows' must be a non-empty list of rows (name, n, k or rate)")
    rows = []
    for i, raw in enumerate(rows_in):
        where = f"{p} rows[{i}]"
        if not isinstance(raw, dict):
            raise PublishedError(f"{where} must be a mapping with name, n and k (or rate)")
        unknown = sorted(set(raw) - set(ROW_KEYS))
        if unknown:
            raise PublishedError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(ROW_KEYS)}")
        if not isinstance(raw.get("name"), str) or not raw["name"].strip():
            raise PublishedError(f"{where} has no name")
        where = f"{p} row {raw['name']!r}"
        n = _number(raw.get("n"), f"{where}: n", integer=True)
        if not n:
            raise PublishedError(f"{where}: n (episodes, an integer > 0) is required")
        k = _number(raw.get("k"), f"{where}: k", integer=True)
        rate = _number(raw.get("rate"), f"{where}: rate")
        if k is None and rate is None:
            raise PublishedError(f"{where}: give k (successes) or rate (a fraction in [0, 1])")
        if k is not None and k > n:
            raise PublishedError(f"{where}: k = {k} is more than n = {n}")
        if rate is not None and rate > 1:
            raise PublishedError(f"{where}: rate must be a fraction in [0, 1] (e.g. 0.824 for 82.4 %), got {rate!r}")
        if k is not None and rate is not None and abs(k / n - rate) > 0.5 / n + 1e-9:
            raise PublishedError(f"{where}: k/n = {k}/{n} does not match rate {rate}")
        row = {"name": raw["name"].strip(), "n": n, "k": k, "rate": (k / n) if k is not None else float(rate),
               "rate_published": None if raw.get("rate_published") is None else str(raw["rate_published"]),
               "k_derived": bool(raw.get("k_derived", False)),
               "note": raw.get("note"), "source": raw.get("source") or doc.get("source"),
               "url": raw.get("url") or doc.get("url"), "planner": raw.get("planner"), "model": raw.get("model")}
        for key in ("wall_s_per_episode", "tokens_out_per_episode", "tokens_per_episode", "cost_usd_per_episode"):
            row[key] = _number(raw.get(key), f"{where}: {key}")
        if not row["source"]:
            raise PublishedError(f"{where}: no source (give 'source:' in the row or at the top of the file)")
        rows.append(row)
    return {"path": str(p), "benchmark": doc.get("benchmark"), "source": doc.get("source"),
            "url": doc.get("url"), "rows": rows}
