"""``rpent-batch compare``: arm B against arm A, per task and overall.

Per (suite, task) row: ``k_a/N_a`` vs ``k_b/N_b``, the difference in points (B - A), a two-sided
Fisher exact p-value (``scipy.stats.fisher_exact``) and its Benjamini-Hochberg adjusted value
over the task rows (``scipy.stats.false_discovery_control``); the verdict of a task row uses the
adjusted value (many tasks, one question each: fewer false alarms in a CI gate). Overall: the
Cochran-Mantel-Haenszel test with the tasks as strata (``rpent.batch.stats.cmh_test``), which
respects that tasks differ in difficulty; the pooled Fisher p-value is shown next to it.
Verdicts: ``better`` / ``worse`` (p < alpha) / ``no significant difference`` / ``no data``.
Infra and pending cells are not in N and are shown per side, never silently dropped.

What is compared (``basis``): ``environment`` (default) counts the cells whose deciding attempt's
environment predicate held; ``label`` counts those whose run is labelled ``succeeded`` (the
operator's verdict where one was required; :mod:`rpent.recording.outcome`). The output names the
basis and each side's verdict and disagreement counts.

The product documents' 70/100 vs 73/100 ("+3 points") gives pooled Fisher p = 0.754: no
significant difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rpent.batch.matrix import Matrix
from rpent.batch.records import ResultsRoot
from rpent.batch.stats import bh_adjust, cmh_test, fisher_two_sided, verdict

__all__ = ["load_side", "compare_counts", "compare_roots", "render_compare", "Side", "BASES", "BASIS_TEXT"]

Side = dict  # {"label", "basis", "verdicts", "disagreements", "tasks": {(suite, task): {"k", "n", "infra", "pending"}}}

#: What ``compare`` counts as a success: the environment predicate or the run's label.
BASES = ("environment", "label")
BASIS_TEXT = {"environment": "environment predicate success", "label": "label success (operator verdicts where given)"}


def load_side(root: str | Path, arm: str | None, basis: str = "environment") -> Side:
    """Per-task counts of one arm of a results root, read from its run records.

    Args:
        root: a results root (holds ``matrix.json``).
        arm: the arm's name; None when the root has exactly one arm.
        basis: ``environment`` or ``label`` (module docstring).
    Raises:
        ValueError: no matrix.json, ``arm`` is missing / ambiguous (names the arms), or an unknown basis.
    """
    if basis not in BASES:
        raise ValueError(f"--by must be one of {', '.join(BASES)}, got {basis!r}")
    rr = ResultsRoot(root)
    if not rr.matrix_path.exists():
        raise ValueError(f"{root} is not an rpent-batch results root (no matrix.json)")
    try:
        matrix = Matrix.from_dict(json.loads(rr.matrix_path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{rr.matrix_path} is unreadable ({type(exc).__name__}); restore it or re-run the batch "
                         "into a new results root") from None
    names = [a.name for a in matrix.arms]
    if arm is None:
        if len(names) != 1:
            raise ValueError(f"{root} has arms {', '.join(names)}; name one with --arms A B (or --arm-a/--arm-b)")
        arm = names[0]
    elif arm not in names:
        raise ValueError(f"{root} has no arm {arm!r}; arms: {', '.join(names)}")
    cells = matrix.cells(arm)
    states = rr.cell_states(cells)
    tasks: dict[tuple[str, int], dict[str, int]] = {}
    verdicts = disagreements = 0
    for c in cells:
        t = tasks.setdefault((c.suite, c.task), {"k": 0, "n": 0, "infra": 0, "pending": 0})
        st = states[c.key]
        s = st.status
        if s in ("success", "failure"):
            d = st.decided
            t["n"] += 1
            t["k"] += (s == "success") if basis == "environment" else (d.label == "succeeded")
            verdicts += d.verdict is not None
            disagreements += bool(d.disagreement)
        else:
            t[s] += 1
    return {"label": f"{Path(root).name}:{arm}", "root": str(rr.root), "arm": arm, "tasks": tasks, "basis": basis,
            "verdicts": verdicts, "disagreements": disagreements}


def compare_counts(a: Side, b: Side, *, alpha: float = 0.05) -> dict[str, Any]:
    """Compare two sides (see the module docstring).

    Returns:
        ``{"a", "b", "alpha", "rows": [{"suite", "task", "a": {k, n, infra, pending, rate},
        "b": {...}, "diff_points", "p_fisher", "p_adjusted", "verdict"}], "overall": {"a", "b",
        "diff_points", "p_cmh", "cmh_statistic", "common_odds_ratio", "p_fisher_pooled",
        "verdict"}, "regression": bool, "warnings": [str], "basis", "basis_text", "verdicts":
        {"a", "b"}, "disagreements": {"a", "b"}}``; rates are fractions, differences in percentage
        points (B - A).
    Raises:
        ValueError: the two sides were counted on different bases.
    """
    keys = sorted(set(a["tasks"]) | set(b["tasks"]))
    rows, warnings = [], []
    for key in keys:
        ta = a["tasks"].get(key, {"k": 0, "n": 0, "infra": 0, "pending": 0})
        tb = b["tasks"].get(key, {"k": 0, "n": 0, "infra": 0, "pending": 0})
        ra = ta["k"] / ta["n"] if ta["n"] else None
        rb = tb["k"] / tb["n"] if tb["n"] else None
        diff = round(100 * (rb - ra), 3) if ra is not None and rb is not None else None
        rows.append({"suite": key[0], "task": key[1], "a": {**ta, "rate": ra}, "b": {**tb, "rate": rb},
                     "diff_points": diff, "p_fisher": fisher_two_sided(ta["k"], ta["n"], tb["k"], tb["n"])})
        if key not in a["tasks"] or key not in b["tasks"]:
            warnings.append(f"{key[0]} task {key[1]} is only in {'B' if key not in a['tasks'] else 'A'}")
    for row, q in zip(rows, bh_adjust([r["p_fisher"] for r in rows])):
        row["p_adjusted"] = q
        row["verdict"] = verdict(row["diff_points"], q, alpha)
    tot = {side: {f: sum(r[side][f] for r in rows) for f in ("k", "n", "infra", "pending")} for side in ("a", "b")}
    for side in ("a", "b"):
        t = tot[side]
        t["rate"] = t["k"] / t["n"] if t["n"] else None
        if t["infra"] or t["pending"]:
            warnings.append(f"{side.upper()} has {t['infra']} infra-error and {t['pending']} pending cells "
                            "outside N")
    both = [r for r in rows if r["a"]["n"] and r["b"]["n"]]
    one_sided = len(rows) - len(both)
    cmh = cmh_test([(r["a"]["k"], r["a"]["n"], r["b"]["k"], r["b"]["n"]) for r in both])
    diff = (round(100 * (tot["b"]["rate"] - tot["a"]["rate"]), 3)
            if tot["a"]["rate"] is not None and tot["b"]["rate"] is not None else None)
    overall = {"a": tot["a"], "b": tot["b"], "diff_points": diff, "p_cmh": cmh.pvalue,
               "cmh_statistic": cmh.statistic, "common_odds_ratio": cmh.common_odds_ratio,
               "strata_used": cmh.strata_used,
               # tasks left out of the CMH test: no episodes on one side, or no variation (every episode
               # of both sides a success, or every one a failure, or fewer than 2 episodes)
               "strata_dropped_one_sided": one_sided,
               "strata_dropped_uninformative": len(both) - cmh.strata_used,
               "p_fisher_pooled": fisher_two_sided(tot["a"]["k"], tot["a"]["n"], tot["b"]["k"], tot["b"]["n"]),
               "verdict": verdict(diff, cmh.pvalue if both else None, alpha)}
    regression = overall["verdict"] == "worse" or any(r["verdict"] == "worse" for r in rows)
    basis = a.get("basis", "environment")
    if b.get("basis", "environment") != basis:
        raise ValueError(f"the sides count different successes ({basis} vs {b.get('basis')}); compare one basis")
    for side, name in ((a, "A"), (b, "B")):
        if side.get("disagreements"):
            warnings.append(f"{name} has {side['disagreements']} deciding attempt(s) whose operator verdict disagrees "
                            f"with the environment predicate; this comparison counts {BASIS_TEXT[basis]} "
                            f"(--by {'label' if basis == 'environment' else 'environment'} counts the other)")
    return {"a": a["label"], "b": b["label"], "alpha": alpha, "basis": basis, "basis_text": BASIS_TEXT[basis],
            "verdicts": {"a": a.get("verdicts", 0), "b": b.get("verdicts", 0)},
            "disagreements": {"a": a.get("disagreements", 0), "b": b.get("disagreements", 0)},
            "rows": rows, "overall": overall, "regression": regression, "warnings": warnings}


def compare_roots(root_a: str | Path, root_b: str | Path | None, arm_a: str | None, arm_b: str | None,
                  *, alpha: float = 0.05, basis: str = "environment") -> dict[str, Any]:
    """Load both sides (``root_b`` None: both arms from ``root_a``) and :func:`compare_counts` them
    on ``basis`` (``environment`` or ``label``)."""
    a = load_side(root_a, arm_a, basis)
    b = load_side(root_b if root_b is not None else root_a, arm_b, basis)
    return compare_counts(a, b, alpha=alpha)


def _fmt_side(s: dict) -> str:
    extra = "".join(f" +{s[f]} {f}" for f in ("infra", "pending") if s[f])
    rate = "-" if s["rate"] is None else f"{100 * s['rate']:.1f}%"
    return f"{s['k']}/{s['n']} ({rate}){extra}"


def _fmt_p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.3g}" if p >= 1e-4 else f"{p:.1e}")


def render_compare(result: dict[str, Any]) -> str:
    """Markdown table of a :func:`compare_counts` result (printed by ``rpent-batch compare``)."""
    lines = [f"A = {result['a']}    B = {result['b']}    alpha = {result['alpha']:g}",
             f"compared: {result.get('basis_text', BASIS_TEXT['environment'])} (--by {result.get('basis', 'environment')})"
             + (f"; operator verdicts A {result['verdicts']['a']}, B {result['verdicts']['b']}; disagreements "
                f"A {result['disagreements']['a']}, B {result['disagreements']['b']}" if "verdicts" in result else ""),
             "",
             "| suite | task | A k/N | B k/N | B - A (points) | Fisher p | BH-adjusted p | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        diff = "-" if r["diff_points"] is None else f"{r['diff_points']:+.1f}"
        lines.append(f"| {r['suite']} | {r['task']} | {_fmt_side(r['a'])} | {_fmt_side(r['b'])} | {diff} | "
                     f"{_fmt_p(r['p_fisher'])} | {_fmt_p(r['p_adjusted'])} | {r['verdict']} |")
    o = result["overall"]
    diff = "-" if o["diff_points"] is None else f"{o['diff_points']:+.1f}"
    lines.append(f"| **overall** | | {_fmt_side(o['a'])} | {_fmt_side(o['b'])} | {diff} | "
                 f"{_fmt_p(o['p_fisher_pooled'])} (pooled) | CMH {_fmt_p(o['p_cmh'])} | **{o['verdict']}** |")
    dropped = []
    if o.get("strata_dropped_uninformative"):
        dropped.append(f"{o['strata_dropped_uninformative']} without information: every episode on both sides a "
                       "success, or every one a failure")
    if o.get("strata_dropped_one_sided"):
        dropped.append(f"{o['strata_dropped_one_sided']} without episodes on one side")
    n_dropped = (o.get("strata_dropped_uninformative") or 0) + (o.get("strata_dropped_one_sided") or 0)
    why = f" ({n_dropped} dropped: {'; '.join(dropped)})" if dropped else ""
    lines += ["", f"overall: B - A = {diff} points; Cochran-Mantel-Haenszel over {o['strata_used']} informative "
              f"task strata{why} p = {_fmt_p(o['p_cmh'])} (pooled Fisher p = {_fmt_p(o['p_fisher_pooled'])}): "
              f"{o['verdict']}"]
    lines += [f"warning: {w}" for w in result["warnings"]]
    if result["regression"]:
        lines.append("regression: B is significantly worse than A " +
                     ("overall" if o["verdict"] == "worse" else "on at least one task"))
    return "\n".join(lines) + "\n"
