"""The leaderboard document: one row per arm of one or more ``rpent-batch`` results roots (read from
their run records), plus published reference rows, plus pairwise comparisons.

Every figure of a run row comes from the records through ``rpent.batch`` (cell states, the report's
:func:`~rpent.batch.report.summarize` row, the Fisher / Cochran-Mantel-Haenszel comparison), so the
page, ``report.md`` and ``rpent-batch compare`` agree. Success is the environment's predicate (the
cell's first attempt with a task outcome); where records carry an operator verdict the run's label
is counted next to it (``label success``), read by :func:`rpent.recording.outcome.outcome_from_doc`.

Document (``build_board``; JSON-able, embedded in the HTML page)::

    {"schema": "rpent.leaderboard/1", "generated_at", "confidence", "suites": [...],
     "roots": [{"root", "root_rel" (relative to the page), "name", "suites", "tasks", "seeds",
                "invocations": [{"started", "ended", "argv", "host", "cpus", "commit"}]}],
     "rows": [row, ...],        # run rows (kind "run") then published rows (kind "published")
     "pairs": {"<id A>|<id B>": comparison}}

A run row: ``{"id", "kind": "run", "name", "arm", "root", "root_name", "planner", "model", "note",
"seeds", "overall": summary, "suites": {suite: summary}, "p90_wall_s", "label": {...} | None,
"not_run", "tasks": [{"suite", "task", "k", "n", "cells": [cell]}]}`` where a summary is
:func:`rpent.batch.report.summarize`'s row and a cell is ``{"key", "seed", "repeat", "status",
"reason", "attempts", "wall_s", "links": {"transcript", "video", "dir", "log", "not_run"}}`` with
links relative to the page's directory (None where the file does not exist).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from rpent.batch.matrix import Matrix, format_index_list
from rpent.batch.records import NOT_RUN, CellState, ResultsRoot
from rpent.batch.report import summarize
from rpent.batch.stats import fisher_two_sided
from rpent.run.record import run_tag

__all__ = ["build_board", "load_root_rows", "LeaderboardError", "BOARD_SCHEMA"]

BOARD_SCHEMA = "rpent.leaderboard/1"


class LeaderboardError(ValueError):
    """A results root cannot be read (the message names it and the fix)."""


def _finite(x: Any) -> Any:
    """JSON-safe: non-finite floats become None (JavaScript's JSON.parse refuses NaN/Infinity)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


def _cell_links(st: CellState, page_dir: Path) -> dict[str, str | None]:
    att = st.decided or (st.attempts[-1] if st.attempts else None)
    links: dict[str, str | None] = {"transcript": None, "video": None, "dir": None, "log": None, "not_run": None}
    if att is None:
        return links
    run_dir = Path(att.run_dir)
    c = st.cell
    for key, p in (("transcript", run_dir / f"transcript_{run_tag(c.suite, c.task, c.seed)}.json"),
                   ("video", run_dir / "episode.mp4"), ("not_run", run_dir / NOT_RUN),
                   ("log", run_dir.parent / f"attempt-{att.attempt}.log")):
        if p.is_file():
            links[key] = _rel(p, page_dir)
    if run_dir.is_dir():
        links["dir"] = _rel(run_dir, page_dir) + "/"
    return links


def _p90(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(float(np.percentile(vals, 90)), 3) if vals else None


def _label_stats(states: list[CellState]) -> dict[str, Any] | None:
    """Environment-predicate vs label success over the decided cells whose record has a label; None
    when no record of ``states`` carries an operator verdict."""
    decided = [s.decided for s in states if s.decided is not None]
    if not any(a.verdict is not None for a in decided):
        return None
    labelled = [a for a in decided if a.label is not None]
    with_verdict = [a for a in labelled if a.verdict is not None]
    return {"n": len(labelled), "label_k": sum(a.label == "succeeded" for a in labelled),
            "env_k": sum(a.status == "success" for a in labelled), "verdicts": len(with_verdict),
            "disagreements": sum((a.label == "succeeded") != (a.status == "success") for a in labelled)}


def _read_matrix(rr: ResultsRoot) -> Matrix:
    try:
        return Matrix.from_dict(json.loads(rr.matrix_path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise LeaderboardError(f"{rr.root} is not an rpent-batch results root (no matrix.json); pass the "
                               "--results-root of a batch") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LeaderboardError(f"{rr.matrix_path} is unreadable ({type(exc).__name__}: {exc}); restore it") from None


def _invocations(rr: ResultsRoot) -> list[dict[str, Any]]:
    try:
        doc = json.loads(rr.manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for inv in doc.get("invocations") or []:
        if not isinstance(inv, dict):
            continue
        m = inv.get("machine") or {}
        out.append({"started": inv.get("started"), "ended": inv.get("ended"), "argv": inv.get("argv"),
                    "host": m.get("hostname"), "cpus": m.get("cpu_count"), "executor": inv.get("executor"),
                    "parallel": inv.get("parallel"), "commit": (inv.get("rpent") or {}).get("commit"),
                    "dirty": (inv.get("rpent") or {}).get("dirty"), "exit_code": inv.get("exit_code")})
    return out


def load_root_rows(root: str | Path, page_dir: Path, confidence: float = 0.95) -> tuple[dict, list[dict]]:
    """The root's description and one run row per arm (see the module docstring).

    Raises:
        LeaderboardError: not a results root / unreadable ``matrix.json``.
    """
    rr = ResultsRoot(root)
    matrix = _read_matrix(rr)
    states = rr.cell_states(matrix.cells())
    info = {"root": str(rr.root), "root_rel": _rel(rr.root, page_dir), "name": rr.root.name, "suites": list(matrix.suites), "tasks": format_index_list(matrix.tasks),
            "seeds": format_index_list(matrix.seeds), "repeats": matrix.repeats, "invocations": _invocations(rr)}
    rows = []
    for arm in matrix.arms:
        cells = matrix.cells(arm.name)
        arm_states = [states[c.key] for c in cells]
        overall = summarize(arm_states, arm, confidence)
        suites = {s: summarize([states[c.key] for c in cells if c.suite == s], arm, confidence) for s in matrix.suites}
        tasks = []
        for s in matrix.suites:
            for t in matrix.tasks:
                sub = [states[c.key] for c in cells if c.suite == s and c.task == t]
                out_cells = []
                for st in sub:
                    d = st.decided
                    last = st.attempts[-1] if st.attempts else None
                    out_cells.append({"key": st.cell.key, "seed": st.cell.seed, "repeat": st.cell.repeat,
                                      "status": st.status, "reason": (d or last).reason if (d or last) else None,
                                      "attempts": len(st.attempts), "wall_s": d.wall_s if d else None,
                                      "not_run": bool(d and d.not_run), "links": _cell_links(st, page_dir)})
                tasks.append({"suite": s, "task": t, "k": sum(c["status"] == "success" for c in out_cells),
                              "n": sum(c["status"] in ("success", "failure") for c in out_cells), "cells": out_cells})
        decided = [s.decided for s in arm_states if s.decided is not None]
        rows.append({"kind": "run", "arm": arm.name, "root": str(rr.root), "root_rel": info["root_rel"],
                     "root_name": rr.root.name,
                     "planner": arm.planner, "model": arm.model, "note": arm.note, "flash_from": arm.flash_from,
                     "seeds": format_index_list(matrix.arm_seeds(arm.name)), "overall": overall, "suites": suites,
                     "p90_wall_s": _p90([a.wall_s for a in decided if not a.not_run]),
                     "not_run": sum(1 for a in decided if a.not_run), "label": _label_stats(arm_states),
                     "tasks": tasks})
    return info, rows


def _side(row: dict) -> dict:
    """A run row as a :func:`rpent.batch.compare.compare_counts` side."""
    tasks = {}
    for t in row["tasks"]:
        statuses = [c["status"] for c in t["cells"]]
        tasks[(t["suite"], t["task"])] = {"k": statuses.count("success"),
                                          "n": statuses.count("success") + statuses.count("failure"),
                                          "infra": statuses.count("infra"), "pending": statuses.count("pending")}
    return {"label": row["name"], "tasks": tasks}


def _pair(a: dict, b: dict, alpha: float) -> dict[str, Any]:
    """B against A: per task and overall (two run rows), or pooled Fisher only (a published row)."""
    from rpent.batch.compare import compare_counts

    if a["kind"] == "run" and b["kind"] == "run":
        res = compare_counts(_side(a), _side(b), alpha=alpha)
        suites = {}
        for r in res["rows"]:
            s = suites.setdefault(r["suite"], {"a": [0, 0], "b": [0, 0]})
            s["a"][0] += r["a"]["k"]
            s["a"][1] += r["a"]["n"]
            s["b"][0] += r["b"]["k"]
            s["b"][1] += r["b"]["n"]
        res["suites"] = [{"suite": s, "a_k": v["a"][0], "a_n": v["a"][1], "b_k": v["b"][0], "b_n": v["b"][1],
                          "p_fisher": fisher_two_sided(v["a"][0], v["a"][1], v["b"][0], v["b"][1])}
                         for s, v in suites.items()]
        res["kind"] = "records"
        named = {"A": a["name"], "B": b["name"]}
        res["warnings"] = [" ".join(named.get(w, w) for w in text.split(" ")) for text in res["warnings"]]
        return res
    ka, na = a["overall"]["k"], a["overall"]["n"]
    kb, nb = b["overall"]["k"], b["overall"]["n"]
    p = fisher_two_sided(ka, na, kb, nb) if ka is not None and kb is not None else None
    diff = round(100 * (kb / nb - ka / na), 3) if ka is not None and kb is not None and na and nb else None
    from rpent.batch.stats import verdict

    return {"kind": "pooled", "a": a["name"], "b": b["name"], "alpha": alpha,
            "overall": {"a": {"k": ka, "n": na}, "b": {"k": kb, "n": nb}, "diff_points": diff, "p_fisher_pooled": p,
                        "verdict": verdict(diff, p, alpha)},
            "warnings": ["a published row has no per-task counts: pooled Fisher exact test only, no CMH"]}


def _published_row(r: dict, i: int) -> dict[str, Any]:
    from rpent.batch.stats import wilson_interval

    ci = wilson_interval(r["k"], r["n"]) if r["k"] is not None else None
    tokens = r["tokens_per_episode"]
    return {"id": f"p{i}", "kind": "published", "name": r["name"], "arm": r["name"], "planner": r.get("planner"),
            "model": r.get("model"), "note": r.get("note"), "source": r["source"], "url": r.get("url"),
            "rate_published": r.get("rate_published"), "k_derived": r["k_derived"],
            "overall": {"planned": r["n"], "k": r["k"], "n": r["n"], "rate": r["rate"],
                        "wilson_low": ci[0] if ci else None, "wilson_high": ci[1] if ci else None,
                        "median_wall_s": None, "tokens_in_per_episode": None,
                        "tokens_out_per_episode": r["tokens_out_per_episode"],
                        "cost_usd_per_episode": r["cost_usd_per_episode"], "infra": 0, "pending": 0},
            "wall_s_per_episode": r["wall_s_per_episode"], "tokens_per_episode": tokens, "suites": {},
            "p90_wall_s": None, "label": None, "tasks": []}


def build_board(roots: list[str | Path], page_dir: str | Path, published: list[dict] | None = None, *,
                confidence: float = 0.95, alpha: float = 0.05) -> dict[str, Any]:
    """The leaderboard document (module docstring) of ``roots`` with the rows of ``published``
    (:func:`rpent.leaderboard.published.load_published` results).

    Args:
        roots: results roots (each one or more arms). page_dir: directory of the page (links are
            relative to it). confidence: Wilson coverage. alpha: significance level of the verdicts.
    Raises:
        LeaderboardError: a root cannot be read; the same root given twice.
    """
    page = Path(page_dir).resolve()
    infos, rows = [], []
    seen = set()
    for root in roots:
        resolved = Path(root).resolve()
        if resolved in seen:
            raise LeaderboardError(f"results root {root} is given twice")
        seen.add(resolved)
        info, r = load_root_rows(root, page, confidence)
        infos.append(info)
        rows += r
    names = [r["arm"] for r in rows]
    for i, r in enumerate(rows):
        r["id"] = f"r{i}"
        r["name"] = r["arm"] if names.count(r["arm"]) == 1 else f"{r['root_name']}:{r['arm']}"
    for sources in published or []:
        for r in sources["rows"]:
            rows.append(_published_row(r, len(rows)))
    suites: list[str] = []
    for info in infos:
        suites += [s for s in info["suites"] if s not in suites]
    pairs = {}
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if a["kind"] == "published" and b["kind"] == "published":
                continue
            pairs[f"{a['id']}|{b['id']}"] = _pair(a, b, alpha)
    doc = {"schema": BOARD_SCHEMA, "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "confidence": confidence, "alpha": alpha, "suites": suites, "roots": infos, "rows": rows, "pairs": pairs,
           "published_files": [{k: p[k] for k in ("path", "benchmark", "source", "url")} for p in published or []]}
    return _finite(doc)
