"""The batch report: per arm, per task and overall success k/N with a Wilson 95 % interval,
infrastructure errors apart (never silently dropped), medians of wall time and env steps,
planner tokens and cost: ``report.json``, ``report.md`` and the printed table.

Two successes are counted, each a k/N with its own Wilson interval: the environment predicate's
(``k``: the deciding attempt's ``environment_success`` held) and the label's (``label_k``: its run
is labelled ``succeeded``; :mod:`rpent.recording.outcome`). They differ only where an operator
gave verdicts (``verdicts``: deciding attempts with a final verdict) or a run was aborted;
``disagreements`` counts deciding attempts whose verdict and predicate disagree. Without verdicts
the label follows the predicate and the markdown shows the predicate alone.

Denominators: ``N`` counts the cells with a task outcome (success or failure). Cells whose
attempts all ended in infrastructure errors (``infra``) and cells not run yet (``pending``) are
listed in their own columns, and ``rate_infra_as_failure = k / (N + infra)`` gives the
conservative rate that counts them as failures. A cell is counted once (its first
success/failure attempt; rpent.batch.records).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from rpent.batch.matrix import Arm, Matrix
from rpent.batch.records import CellState
from rpent.batch.stats import wilson_interval
from rpent.recording.atomic import write_bytes_atomic
from rpent.run.record import dumps_json

__all__ = ["build_report", "write_report", "render_markdown", "summarize", "OUTCOME_FIELDS"]

#: row fields that depend only on which cells succeeded/failed (equal for an interrupted +
#: resumed batch and an uninterrupted one); the others are timings and usage
OUTCOME_FIELDS = ("planned", "k", "n", "failures", "infra", "pending", "rate", "wilson_low", "wilson_high",
                  "rate_infra_as_failure", "label_k", "label_n", "label_rate", "label_wilson_low",
                  "label_wilson_high", "verdicts", "disagreements")


def _median(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(float(statistics.median(vals)), 3) if vals else None


def _mean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(sum(vals) / len(vals), 1) if vals else None


def _cost(arm: Arm | None, a) -> float | None:
    if arm is not None and arm.price_in_usd_per_mtok is not None and arm.price_out_usd_per_mtok is not None:
        if a.tokens_in is None and a.tokens_out is None:
            return None
        return ((a.tokens_in or 0) * arm.price_in_usd_per_mtok + (a.tokens_out or 0) * arm.price_out_usd_per_mtok) / 1e6
    return a.cost_usd


def summarize(states: list[CellState], arm: Arm | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """One report row over ``states`` (the cells of one arm, one task or all tasks).

    Returns:
        dict with ``planned, k, n, failures, infra, pending, rate, wilson_low, wilson_high``
        (fractions), ``rate_infra_as_failure``, ``infra_attempts`` (every infra attempt, retried
        ones too), ``interrupted_attempts``, ``median_wall_s`` (s, process wall time of the
        deciding attempts), ``median_env_steps``, ``tokens_in_per_episode``,
        ``tokens_out_per_episode`` (means), ``cost_usd_per_episode`` and ``cost_usd_total``
        (USD; None when no price is configured and the planner reports none); and the label's
        account: ``label_k`` (deciding attempts labelled succeeded), ``label_n`` (deciding attempts
        with a label), ``label_rate``, ``label_wilson_low``/``label_wilson_high``, ``verdicts``
        (deciding attempts with an operator's final verdict), ``disagreements``; ``unstable``
        (deciding attempts whose simulation blew up: MuJoCo reset the scene; they count as
        recorded, a failure stays a failure).
    """
    statuses = [s.status for s in states]
    k, fails = statuses.count("success"), statuses.count("failure")
    infra, pending = statuses.count("infra"), statuses.count("pending")
    n = k + fails
    ci = wilson_interval(k, n, confidence)
    decided = [s.decided for s in states if s.decided is not None]
    labelled = [a for a in decided if a.label is not None]
    label_k, label_n = sum(1 for a in labelled if a.label == "succeeded"), len(labelled)
    label_ci = wilson_interval(label_k, label_n, confidence)
    costs = [_cost(arm, a) for a in decided]
    known_costs = [c for c in costs if c is not None]
    return {
        "planned": len(states), "k": k, "n": n, "failures": fails, "infra": infra, "pending": pending,
        "rate": round(k / n, 6) if n else None,
        "wilson_low": round(ci[0], 6) if ci else None, "wilson_high": round(ci[1], 6) if ci else None,
        "rate_infra_as_failure": round(k / (n + infra), 6) if n + infra else None,
        "label_k": label_k, "label_n": label_n, "label_rate": round(label_k / label_n, 6) if label_n else None,
        "label_wilson_low": round(label_ci[0], 6) if label_ci else None,
        "label_wilson_high": round(label_ci[1], 6) if label_ci else None,
        "verdicts": sum(1 for a in decided if a.verdict is not None),
        "disagreements": sum(1 for a in decided if a.disagreement),
        "unstable": sum(1 for a in decided if a.unstable),
        "infra_attempts": sum(len(s.infra_attempts()) for s in states),
        "interrupted_attempts": sum(1 for s in states for a in s.attempts if a.status in ("interrupted", "invalid")),
        "median_wall_s": _median([a.wall_s for a in decided]),
        "median_env_steps": _median([a.env_steps for a in decided]),
        "tokens_in_per_episode": _mean([a.tokens_in for a in decided]),
        "tokens_out_per_episode": _mean([a.tokens_out for a in decided]),
        "cost_usd_per_episode": round(sum(known_costs) / len(known_costs), 6) if known_costs else None,
        "cost_usd_total": round(sum(known_costs), 6) if known_costs else None,
    }


def build_report(matrix: Matrix, states: dict[str, CellState], *, results_root: str | Path = "",
                 confidence: float = 0.95) -> dict[str, Any]:
    """The report document (``report.json``) of a results root.

    Args:
        matrix: the root's frozen matrix. states: cell key -> :class:`CellState` of every cell.
        confidence: Wilson interval coverage.
    Returns:
        ``{"schema_version": 1, "results_root", "generated_at", "confidence", "arms": [{"arm",
        "planner", "model", "overall": row, "tasks": [row + {"suite", "task"}]}], "cells":
        [{"key", "status", "attempts", "infra_attempts", "decided_attempt", "run_dir", "reason",
        "environment_success", "label", "verdict", "disagreement", "unstable"}]}`` with rows as in
        :func:`summarize`.
    """
    arms = []
    for arm in matrix.arms:
        cells = matrix.cells(arm.name)
        arm_states = [states[c.key] for c in cells]
        rows = []
        for suite in matrix.suites:
            for task in matrix.tasks:
                sub = [states[c.key] for c in cells if c.suite == suite and c.task == task]
                rows.append({"suite": suite, "task": task, **summarize(sub, arm, confidence)})
        arms.append({"arm": arm.name, "planner": arm.planner, "model": arm.model,
                     "vla": arm.vla_checkpoint or arm.vla_endpoint, "policy_mode": arm.policy_mode,
                     "overall": summarize(arm_states, arm, confidence), "tasks": rows})
    cells_out = []
    for arm in matrix.arms:
        for c in matrix.cells(arm.name):
            st = states[c.key]
            d = st.decided
            last = st.attempts[-1] if st.attempts else None
            cells_out.append({
                "key": c.key, "status": st.status, "attempts": len(st.attempts),
                "infra_attempts": len(st.infra_attempts()),
                "decided_attempt": d.attempt if d else None,
                "run_dir": (d or last).run_dir if (d or last) else None,
                "reason": (d.reason if d else (last.reason if last else None)),
                "environment_success": d.environment_success if d else None,
                "label": d.label if d else None, "verdict": d.verdict if d else None,
                "disagreement": d.disagreement if d else None,
                "unstable": d.unstable if d else None,
                "infra_errors": [a.reason for a in st.infra_attempts()],
                "invalid_attempts": [{"attempt": a.attempt, "reason": a.reason} for a in st.attempts
                                     if a.status == "invalid"],
            })
    return {"schema_version": 1, "results_root": str(results_root),
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "confidence": confidence,
            "arms": arms, "cells": cells_out}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(row: dict) -> str:
    if row["wilson_low"] is None:
        return "-"
    return f"[{100 * row['wilson_low']:.1f}, {100 * row['wilson_high']:.1f}]"


def _num(x: Any, fmt: str = "{:g}") -> str:
    return "-" if x is None else fmt.format(x)


def render_markdown(report: dict[str, Any]) -> str:
    """``report.md``: a leaderboard table (one row per arm) then a per-task table per arm."""
    conf = int(round(100 * report.get("confidence", 0.95)))
    lines = [f"# rpent-batch report: {report.get('results_root', '')}", "",
             f"k/N: successes over episodes with a task outcome; Wilson {conf}% interval; infra = cells whose "
             "every attempt ended in an infrastructure error (not in N; `k/(N+infra)` counts them as failures); "
             "pending = not run yet.", "",
             "| arm | planner | model | k/N | success | Wilson %d%% | infra | k/(N+infra) | pending | retried infra "
             "| median wall s | median env steps | tokens in/out per ep | cost per ep |" % conf,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for a in report["arms"]:
        o = a["overall"]
        tokens = "-" if o["tokens_in_per_episode"] is None else \
            f"{o['tokens_in_per_episode']:g} / {_num(o['tokens_out_per_episode'])}"
        lines.append(f"| {a['arm']} | {a['planner']} | {a['model'] or '-'} | {o['k']}/{o['n']} | {_pct(o['rate'])} | "
                     f"{_ci(o)} | {o['infra']} | {_pct(o['rate_infra_as_failure'])} | {o['pending']} | "
                     f"{o['infra_attempts']} | {_num(o['median_wall_s'], '{:.1f}')} | {_num(o['median_env_steps'])} | {tokens} | "
                     f"{_num(o['cost_usd_per_episode'], '${:.4f}')} |")
    with_verdicts = [a for a in report["arms"] if a["overall"].get("verdicts") or a["overall"].get("disagreements")
                     or a["overall"].get("label_k", a["overall"]["k"]) != a["overall"]["k"]]
    if with_verdicts:
        lines += ["", "## environment predicate and label (operator verdicts)", "",
                  "Where operators gave verdicts the label can differ from the environment predicate: both are "
                  f"counted over the same deciding attempts (Wilson {conf}%).", "",
                  f"| arm | environment k/N | success | label k/N | label success | label Wilson {conf}% | verdicts "
                  "| disagreements |", "|---|---|---|---|---|---|---|---|"]
        for a in with_verdicts:
            o = a["overall"]
            lab = {"rate": o.get("label_rate"), "wilson_low": o.get("label_wilson_low"),
                   "wilson_high": o.get("label_wilson_high")}
            lines.append(f"| {a['arm']} | {o['k']}/{o['n']} | {_pct(o['rate'])} | {o.get('label_k')}/{o.get('label_n')} | "
                         f"{_pct(lab['rate'])} | {_ci(lab)} | {o.get('verdicts')} | {o.get('disagreements')} |")
        rows = [c for c in report["cells"] if c.get("disagreement")]
        if rows:
            lines += ["", "| cell | environment_success | label | verdict | disagreement |", "|---|---|---|---|---|"]
            for c in rows:
                lines.append(f"| {c['key']} | {c['environment_success']} | {c['label']} | {c['verdict']} | "
                             f"{c['disagreement']} |")
    for a in report["arms"]:
        lines += ["", f"## arm {a['arm']}", "",
                  f"| suite | task | k/N | success | Wilson {conf}% | infra | pending | median wall s | median env steps |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in a["tasks"]:
            lines.append(f"| {r['suite']} | {r['task']} | {r['k']}/{r['n']} | {_pct(r['rate'])} | {_ci(r)} | "
                         f"{r['infra']} | {r['pending']} | {_num(r['median_wall_s'], '{:.1f}')} | {_num(r['median_env_steps'])} |")
        o = a["overall"]
        lines.append(f"| **all** | | **{o['k']}/{o['n']}** | **{_pct(o['rate'])}** | {_ci(o)} | {o['infra']} | "
                     f"{o['pending']} | {_num(o['median_wall_s'], '{:.1f}')} | {_num(o['median_env_steps'])} |")
    unstable = [c for c in report["cells"] if c.get("unstable")]
    if unstable:
        lines += ["", "## simulation unstable", "",
                  "Episodes in which MuJoCo found a NaN or huge value and reset the scene: what the environment "
                  "reported is counted as it is (a failure stays a failure), but the scene was not the init "
                  "state's after that step.", "",
                  "| cell | status | where |", "|---|---|---|"]
        for c in unstable:
            lines.append(f"| {c['key']} | {c['status']} | {c['unstable'].replace('|', '/')[:240]} |")
    infra_cells = [c for c in report["cells"] if c["infra_errors"]]
    if infra_cells:
        lines += ["", "## infrastructure errors", "",
                  "Cells with at least one attempt that ended in an infrastructure error. The final status is the "
                  "cell's outcome: `infra` means it has none yet; `success`/`failure` means a retry decided it.", "",
                  "| cell | final status | infra attempts / attempts | latest infra error |", "|---|---|---|---|"]
        for c in infra_cells:
            err = (c["infra_errors"][-1] or "").replace("|", "\\|")[:160]
            lines.append(f"| {c['key']} | {c['status']} | {len(c['infra_errors'])}/{c['attempts']} | {err} |")
    bad = [(c, a) for c in report["cells"] for a in c.get("invalid_attempts", ())]
    if bad:
        lines += ["", "## unreadable run records", "",
                  "Attempts whose run record is unreadable or inconsistent: not counted; a cell with no task "
                  "outcome is re-run on resume.", "",
                  "| cell | attempt | final status | problem |", "|---|---|---|---|"]
        for c, a in bad:
            why = (a["reason"] or "").replace("|", "\\|")[:240]
            lines.append(f"| {c['key']} | {a['attempt']} | {c['status']} | {why} |")
    return "\n".join(lines) + "\n"


def write_report(root: str | Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` atomically into ``root``; returns their paths."""
    root = Path(root)
    pj, pm = root / "report.json", root / "report.md"
    write_bytes_atomic(pj, dumps_json(report).encode("utf-8"))
    write_bytes_atomic(pm, render_markdown(report).encode("utf-8"))
    return pj, pm
