"""What an evaluation run reads from the task memory, and the prompt section that shows it.

An evaluation run opens only its own robot's corpus (``<memory dir>/<robot>/``), read-only:
the manifest is verified first (:func:`rpent.memory.corpus.verify_manifest`), then the index
``MEMORY.md`` and the leaves relevant to the cell are read:

* every ``global/`` leaf;
* ``task-family/`` leaves whose ``suite`` and ``task_id`` match the run;
* the ``task-specific/`` audit + recipe pairs of the same task (any seed; seed 0 is the
  reference, RPent reference §6.1 ``reference_tag``), except a pair whose audit's run is labelled
  other than ``succeeded`` (listed as ``withheld`` in the run's audit; the label policy of
  :mod:`rpent.recording.outcome`).

The api planner has no file tools, so the files' text is put in the system prompt, after a
pointer to ``MEMORY.md`` and the rule that recipes give the step order while coordinates are
always re-perceived (reference §6.2 "Use"). :class:`MemoryContext` lists what was read (path
and sha256) for the run's audit (``transcript_<tag>.json`` key ``memory``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rpent.memory.corpus import MemoryCorpusError, load_leaves, verify_manifest
from rpent.memory.layout import INDEX, corpus_dir

__all__ = ["MemoryContext", "load_context", "MAX_FILE_CHARS"]

#: Characters of one file put in the prompt (longer files are cut, saying so).
MAX_FILE_CHARS = 6000


@dataclass
class MemoryContext:
    """The memory one run read.

    Attributes:
        corpus: the robot's corpus directory.
        files: ``[(relative path, text)]`` in prompt order (``MEMORY.md`` first).
        hashes: ``{relative path: sha256}`` of the files read (from the verified manifest).
        withheld: task-specific pairs left out because their audit's run is not labelled
            succeeded (``{"path", "reason"}``; a corpus merged before the label policy existed).
    """

    corpus: Path
    files: list[tuple[str, str]] = field(default_factory=list)
    hashes: dict[str, str] = field(default_factory=dict)
    withheld: list[dict] = field(default_factory=list)

    def prompt_section(self) -> str:
        """The system-prompt section (Markdown)."""
        parts = ["", "## Task memory (read-only)",
                 f"A task memory for this robot is at {self.corpus}. Read its index {INDEX} and the relevant "
                 "leaves below before acting; they record what worked and failed on earlier runs. Recipes give "
                 "the order of steps only: always re-perceive object positions in this scene. List the memory "
                 "files you used in your finish summary."]
        for rel, text in self.files:
            if len(text) > MAX_FILE_CHARS:
                text = text[:MAX_FILE_CHARS] + f"\n[... cut at {MAX_FILE_CHARS} characters]"
            parts += ["", f"### {rel}", "```", text.rstrip(), "```"]
        return "\n".join(parts) + "\n"

    def audit(self) -> dict:
        """``{"corpus", "files_read": [{"path", "sha256"}]}`` for the run record."""
        out = {"corpus": str(self.corpus),
               "files_read": [{"path": rel, "sha256": self.hashes.get(rel)} for rel, _ in self.files]}
        if self.withheld:
            out["withheld"] = list(self.withheld)
        return out


def load_context(memory_dir: str | Path | None, robot: str, suite: str, task: int) -> MemoryContext:
    """Verify and read the memory relevant to ``(suite, task)`` of ``robot``.

    Args:
        memory_dir: the memory root (None: the default location).
        robot: only ``<root>/<robot>/`` is read.
    Raises:
        MemoryCorpusError: no corpus for the robot, a manifest mismatch (the file is named),
            or an invalid leaf.
    """
    from rpent.flash.files import task_prefix
    from rpent.memory.leaf import LeafError

    corpus = corpus_dir(memory_dir, robot)
    if not (corpus / INDEX).is_file():
        raise MemoryCorpusError(f"no memory corpus for robot {robot!r} at {corpus} (no {INDEX}); run exploration "
                                f"first, or build it with `rpent-memory build-index --memory-dir {corpus.parent}`")
    hashes = verify_manifest(corpus)
    try:
        leaves = load_leaves(corpus)
    except LeafError as exc:
        raise MemoryCorpusError(f"memory corpus {corpus}: {exc}") from None
    ctx = MemoryContext(corpus=corpus, hashes=hashes)
    ctx.files.append((INDEX, (corpus / INDEX).read_text(encoding="utf-8")))
    for leaf in leaves:
        relevant = leaf.scope == "global" or (
            str(leaf.meta.get("suite")) == suite and str(leaf.meta.get("task_id")) == str(task))
        if relevant:
            rel = leaf.path.relative_to(corpus).as_posix()
            ctx.files.append((rel, leaf.path.read_text(encoding="utf-8")))
    ts = corpus / "task-specific"
    if ts.is_dir():
        prefix = task_prefix(suite, task)
        withheld = _withheld_cells(ts, prefix)
        for p in sorted(ts.glob(f"{prefix}_s*"), key=lambda q: (not q.name.startswith(f"{prefix}_s0"), q.name)):
            if p.name.endswith((".json", "_recipe.jsonl")):
                cell = p.name.removesuffix("_recipe.jsonl").removesuffix(".json")
                if cell in withheld:
                    ctx.withheld.append({"path": p.relative_to(corpus).as_posix(), "reason": withheld[cell]})
                    continue
                ctx.files.append((p.relative_to(corpus).as_posix(), p.read_text(encoding="utf-8")))
    return ctx


def _withheld_cells(ts: Path, prefix: str) -> dict[str, str]:
    """``{cell: reason}`` of the task-specific audits (``<cell>.json``) whose run carries a label
    and is not labelled succeeded with its predicate holding (:mod:`rpent.recording.outcome`);
    an audit without a label (merged before labels were recorded) is kept."""
    import json

    from rpent.recording.outcome import label_exclusion, outcome_from_doc

    out: dict[str, str] = {}
    for audit in ts.glob(f"{prefix}_s*.json"):
        try:
            doc = json.loads(audit.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(doc, dict) or "label" not in doc:
            continue
        excluded = label_exclusion(outcome_from_doc(doc, str(audit)))
        if excluded is not None:
            out[audit.stem] = f"{excluded[0]}: {excluded[1]}"
    return out
