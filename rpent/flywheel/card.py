"""The dataset card (``README.md`` inside each exported LeRobot dataset) and the train/val split.

The card is lerobot's own (``create_lerobot_dataset_card``: Hugging Face dataset-card front
matter with the ``LeRobot`` tag and ``meta/info.json``), with a provenance section of ours:
rule set, label policy, source runs (record paths relative to the input root, each with its
label, verdict and the code that made it), planners, the rpent commits and models behind the
runs, counts per ``source`` (scripted / vla), exclusions by reason, and the split.
"""

from __future__ import annotations

import json
import random
import shlex
from collections import Counter
from pathlib import Path


def split_episodes(n_episodes: int, val_fraction: float, seed: int = 0) -> tuple[list[int], list[int]]:
    """Split episode indices ``0..n_episodes-1`` into train and val, by whole episodes.

    Args:
        n_episodes: number of episodes (>= 0).
        val_fraction: share of episodes for val in [0, 1); the val count is
            ``round(n * val_fraction)``, at least 1 when ``val_fraction > 0`` and ``n >= 2``, and
            never all episodes (train keeps at least one).
        seed: seed of the shuffle (``random.Random(seed)``), so a split is reproducible.

    Returns:
        ``(train, val)``: sorted episode indices.

    Raises:
        ValueError: ``val_fraction`` outside [0, 1).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    if val_fraction == 0.0 or n_episodes < 2:
        return list(range(n_episodes)), []
    n_val = min(n_episodes - 1, max(1, round(n_episodes * val_fraction)))
    order = list(range(n_episodes))
    random.Random(seed).shuffle(order)
    return sorted(order[n_val:]), sorted(order[:n_val])


def provenance_markdown(report: dict, split_name: str, episode_indices: list[int]) -> str:
    """The card's provenance section for split ``split_name`` (markdown).

    Args:
        report: the export report (``report.json`` content).
        split_name: ``"train"`` or ``"val"``.
        episode_indices: the report's global episode indices in this split (in dataset order).
    """
    eps = {e["episode_index"]: (r, e) for r in report["runs"] for e in r["episodes"]}
    mine = [eps[i] for i in episode_indices]
    runs = list(dict.fromkeys(r["record"] for r, _ in mine))
    planners = Counter(r.get("planner") for r, _ in mine)
    sources: Counter = Counter()
    for _, e in mine:
        sources.update(e.get("sources", {}))
    reasons = Counter(x["reason"] for x in report["exclusions"])
    by_record = {r["record"]: r for r in report["runs"]}
    made_by: Counter = Counter()
    models: Counter = Counter()
    for rec in runs:
        prov = by_record[rec].get("provenance") or {}
        if prov.get("commit") or prov.get("rpent_version"):
            made_by[f"rpent {prov.get('rpent_version')} commit {prov.get('commit') or 'unknown'}"
                    + (" (dirty)" if prov.get("dirty") else "")] += 1
        else:
            made_by["unknown (record without provenance)"] += 1
        for kind, ident in (prov.get("models") or {}).items():
            if ident:
                models[f"{kind}: {ident.get('checkpoint') or ident.get('endpoint')} "
                       f"(fingerprint {(ident.get('fingerprint') or 'none')[:16]})"] += 1
    exporter = report.get("exported_by") or {}
    lines = [
        f"Exported by `rpent-flywheel` (rpent {report.get('rpent_version')}) on {report['created_at']} "
        f"with rule set **{report['rules']}** ({report['rules_description']}).",
        "",
        f"- Split: `{split_name}`: {len(mine)} episode(s), {sum(e['frames'] for _, e in mine)} frame(s)"
        + (f" (split by episode, val fraction {report['split']['val_fraction']}, seed {report['split']['seed']})"
           if report.get("split", {}).get("val_fraction") else ""),
        f"- Frames by action source: {json.dumps(dict(sorted(sources.items())))}",
        f"- Planners: {json.dumps({str(k): v for k, v in sorted(planners.items(), key=lambda kv: str(kv[0]))})}",
        f"- Robot: {report['robot']}; fps {report['dataset']['fps']}; cameras stored as "
        + ("video (" + report["dataset"]["vcodec"] + ")" if report["dataset"]["use_videos"] else "PNG images"),
        "- Statistics (`meta/stats.json`): lerobot's per-episode statistics aggregated by lerobot; camera "
        + ("statistics on every 4th pixel row and column of lerobot's frame sample"
           if report["dataset"].get("image_stats", "sampled") == "sampled" else "statistics on every pixel"),
        f"- Input root: `{report['input_root']}`; runs seen {report['counts']['runs_seen']}, "
        f"exported {report['counts']['runs_exported']}",
        f"- Label policy: `{report.get('label_policy', 'succeeded')}`: {report.get('label_policy_description', '')}"
        + (f"; {report['counts'].get('disagreements_included', 0)} exported run(s) are disagreements"
           if report.get("label_policy") != "succeeded" else ""),
        f"- Exclusions by reason (whole export): {json.dumps(dict(sorted(reasons.items())))}",
        f"- Runs made by: {json.dumps(dict(sorted(made_by.items())))}",
        f"- Models used by the runs: {json.dumps(dict(sorted(models.items())))}",
        f"- Exported by: rpent {exporter.get('rpent_version')} commit {exporter.get('commit')}"
        + (" (dirty)" if exporter.get("dirty") else "") + f" on {exporter.get('host')}",
        "",
        *_collection_lines(report),
        "Source runs (record directories relative to the input root; label, operator verdict):",
        "",
        *[f"- `{r}`: label {(by_record[r].get('outcome') or {}).get('label')}, verdict "
          f"{(by_record[r].get('outcome') or {}).get('verdict')}"
          + (" (disagreement, included for study)" if by_record[r].get("disagreement_included") else "")
          for r in runs],
        "",
        "The full per-run account is in `../report.json` next to this dataset.",
    ]
    return "\n".join(lines)


def _collection_lines(report: dict) -> list[str]:
    """Card lines naming the ``rpent-batch`` commands that recorded the runs (``report["collection"]``)."""
    cmds = report.get("collection") or []
    if not cmds:
        return ["Collected by: single `rpent` runs (no rpent-batch manifest above the records).", ""]
    lines = ["Collected with (rpent-batch invocations, from each results root's `manifest.json`):", ""]
    for c in cmds:
        lines.append(f"- `{shlex.join(c['argv'])}` (in `{c.get('cwd')}`, started {c.get('started')})")
    return lines + [""]


def write_dataset_card(dataset_root: Path, report: dict, split_name: str, episode_indices: list[int]) -> Path:
    """Write ``<dataset_root>/README.md`` with lerobot's card template and our provenance.

    Raises:
        OSError: the card cannot be written.
        LeRobotUnavailableError: lerobot is not importable.
    """
    from rpent.flywheel.lerobot_compat import import_lerobot_dataset

    import_lerobot_dataset()  # the torchvision shim, before lerobot.datasets.utils imports it
    from lerobot.datasets.utils import create_lerobot_dataset_card

    info = json.loads((dataset_root / "meta" / "info.json").read_text(encoding="utf-8"))
    card = create_lerobot_dataset_card(
        tags=["rpent", "flywheel", report.get("robot") or "robot", f"rules-{report['rules']}"],
        dataset_info=info,
        dataset_description=provenance_markdown(report, split_name, episode_indices),
    )
    path = dataset_root / "README.md"
    card.save(str(path))
    return path
