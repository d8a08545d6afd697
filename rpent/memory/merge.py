"""Merge an exploration inbox into the corpus (``rpent-memory merge``; RPent reference §6.2).

Under a file lock (``_internal/.merge.lock``, :mod:`filelock`):

1. every draft leaf of ``_internal/inbox/<cell>/*.md`` is validated first; one invalid draft
   refuses the whole merge and nothing is written. A draft's file name may carry the draft
   prefixes/suffix (``new_``, ``suite_``, ``<kind>_``, ``_draft``); its id is the bare slug;
2. a new id is written directly to ``global/`` (scope global) or ``task-family/`` (scope
   suite); an existing id only gets its evidence merged: cells unioned, attempts summed,
   confidence recomputed (:func:`rpent.memory.leaf.confidence_for`, never lowered). When the
   draft's prose differs from the leaf's, the draft is archived under
   ``_internal/conflicts/<cell>/<id>.md`` and the published prose is kept;
3. only with ``solved=True`` is the audit + recipe pair (``<cell>.json`` and
   ``<cell>_recipe.jsonl`` in the inbox) copied to ``task-specific/``, and only when the audit's
   run is labelled ``succeeded`` with its environment predicate holding (a run the operator
   rejected or aborted refuses the whole merge, naming the reason);
4. the inbox is moved to ``_internal/merged/<cell>/`` (``wip/`` notes travel with it, never
   into the corpus), ``MEMORY.md`` and ``manifest.json`` are rebuilt.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from rpent.memory.corpus import build_index
from rpent.memory.layout import INTERNAL, KIND_PREFIXES
from rpent.memory.leaf import CONFIDENCES, Leaf, LeafError, confidence_for, parse_leaf, read_leaf_file, render_leaf
from rpent.recording.atomic import write_bytes_atomic

__all__ = ["MergeError", "MergeReport", "merge_inbox", "draft_id", "inbox_dir", "LOCK_TIMEOUT_S"]

#: Seconds to wait for another merge to release the lock.
LOCK_TIMEOUT_S = 60.0
_CELL = re.compile(r"^[a-z0-9_]+_t\d+_s\d+$")


class MergeError(ValueError):
    """The merge was refused (nothing written); the message names the draft and the rule."""


@dataclass
class MergeReport:
    """What a merge did (paths relative to the corpus)."""

    cell: str
    created: list[str] = field(default_factory=list)
    evidence_merged: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    task_pair: list[str] = field(default_factory=list)
    archived_to: str | None = None

    def to_dict(self) -> dict:
        """JSON-able dict."""
        return dict(self.__dict__)


def inbox_dir(corpus: Path, cell: str) -> Path:
    """``<corpus>/_internal/inbox/<cell>``."""
    return corpus / INTERNAL / "inbox" / cell


def draft_id(stem: str) -> str:
    """The bare slug of a draft file stem: ``new_perception_tall_masks_draft`` -> ``tall_masks``."""
    out = stem
    for prefix in ("new_", "suite_") + KIND_PREFIXES:
        if out.startswith(prefix):
            out = out[len(prefix):]
    return out.removesuffix("_draft")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def merge_inbox(corpus: Path, cell: str, *, solved: bool, lock_timeout_s: float = LOCK_TIMEOUT_S) -> MergeReport:
    """Merge ``_internal/inbox/<cell>`` into ``corpus`` (see module docstring).

    Raises:
        MergeError: bad cell name, no inbox, an invalid draft, a pair missing its half while
            ``solved``, an audit not labelled succeeded while ``solved``, or the lock not acquired
            within ``lock_timeout_s``.
    """
    if not _CELL.match(cell):
        raise MergeError(f"--cell {cell!r} is not a cell tag like object_t0_s0 (<suite without libero_>_t<task>_s<seed>)")
    inbox = inbox_dir(corpus, cell)
    if not inbox.is_dir():
        raise MergeError(f"no inbox for cell {cell} at {inbox}; exploration writes drafts there")
    (corpus / INTERNAL).mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(corpus / INTERNAL / ".merge.lock"))
    try:
        lock.acquire(timeout=lock_timeout_s)
    except TimeoutError:
        raise MergeError(f"another merge holds {corpus / INTERNAL / '.merge.lock'}; retry when it ends") from None
    try:
        return _merge_locked(corpus, cell, inbox, solved)
    finally:
        lock.release()


def _check_audit_label(audit: Path) -> None:
    """Refuse an audit (a run's transcript) whose run is not labelled succeeded with its predicate
    holding (:func:`rpent.recording.outcome.label_exclusion`): a run the operator rejected or
    aborted never becomes a task-specific pair.

    Raises:
        MergeError: naming the reason (``operator_rejected``, ``aborted``, ...).
    """
    from rpent.recording.outcome import EXCLUSION_TEXT, OutcomeReadError, label_exclusion, outcome_from_doc

    try:
        doc = json.loads(audit.read_text(encoding="utf-8"))
        outcome = outcome_from_doc(doc, str(audit))
    except (OSError, UnicodeDecodeError, ValueError, OutcomeReadError) as exc:
        raise MergeError(f"--solved but the audit {audit} cannot be read ({exc}); nothing merged") from None
    excluded = label_exclusion(outcome)
    if excluded is None and outcome.environment_success is not True:
        excluded = ("not_successful", f"environment_success={outcome.environment_success!r}")
    if excluded is not None:
        reason, detail = excluded
        raise MergeError(f"--solved refused ({reason}): the audit {audit.name} is of a run that is not labelled "
                         f"succeeded: {EXCLUSION_TEXT[reason]}; {detail}. Nothing merged; merge without --solved "
                         "to publish only the drafts")


def _merge_locked(corpus: Path, cell: str, inbox: Path, solved: bool) -> MergeReport:
    drafts: list[Leaf] = []
    for p in sorted(inbox.glob("*.md")):
        try:
            drafts.append(parse_leaf(read_leaf_file(p), draft_id(p.stem), p))
        except LeafError as exc:
            raise MergeError(f"draft refused, nothing merged: {exc}") from None
    audit, recipe = inbox / f"{cell}.json", inbox / f"{cell}_recipe.jsonl"
    if solved and not (audit.is_file() and recipe.is_file()):
        missing = [p.name for p in (audit, recipe) if not p.is_file()]
        raise MergeError(f"--solved but the inbox of {cell} lacks {', '.join(missing)} (the audit + recipe pair)")
    if solved:
        _check_audit_label(audit)
    report = MergeReport(cell=cell)
    for draft in drafts:
        tier = "global" if draft.scope == "global" else "task-family"
        dest = corpus / tier / f"{draft.id}.md"
        rel = f"{tier}/{draft.id}.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            write_bytes_atomic(dest, render_leaf(draft).encode("utf-8"))
            report.created.append(rel)
            continue
        leaf = parse_leaf(read_leaf_file(dest), draft.id, dest)
        cells = sorted(set(leaf.cells) | set(draft.cells))
        computed = confidence_for(cells)
        old = leaf.meta.get("confidence", "single-shot")
        leaf.meta["evidence"] = {**(leaf.meta.get("evidence") or {}), "cells": cells,
                                 "attempts": leaf.attempts + draft.attempts}
        leaf.meta["confidence"] = max(old, computed, key=CONFIDENCES.index)
        write_bytes_atomic(dest, render_leaf(leaf).encode("utf-8"))
        report.evidence_merged.append(rel)
        if _norm(leaf.body) != _norm(draft.body):
            conflict = corpus / INTERNAL / "conflicts" / cell / f"{draft.id}.md"
            conflict.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(draft.path, conflict)
            report.conflicts.append(conflict.relative_to(corpus).as_posix())
    if solved:
        ts = corpus / "task-specific"
        ts.mkdir(parents=True, exist_ok=True)
        for src in (audit, recipe):
            write_bytes_atomic(ts / src.name, src.read_bytes())
            report.task_pair.append(f"task-specific/{src.name}")
    merged = corpus / INTERNAL / "merged" / cell
    if merged.exists():
        merged = merged.with_name(f"{cell}-{time.strftime('%Y%m%d-%H%M%S')}")
    merged.parent.mkdir(parents=True, exist_ok=True)
    inbox.rename(merged)
    report.archived_to = merged.relative_to(corpus).as_posix()
    build_index(corpus)
    return report
