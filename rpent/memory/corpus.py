"""A robot's memory corpus on disk: leaves, ``MEMORY.md`` index, ``manifest.json`` of hashes.

The manifest (reference §6.2) lists the sha256 of every corpus file except itself and
``_internal/`` (drafts are not part of the published corpus). :func:`verify_manifest`
refuses a corpus whose files differ from it — a changed, extra or missing file is named —
before anything is read. Writers (merge, build-index) rewrite it with :func:`write_manifest`.
"""

from __future__ import annotations

import json
from pathlib import Path

from rpent.memory.layout import INDEX, INTERNAL, MANIFEST, TIERS
from rpent.memory.leaf import Leaf, LeafError, parse_leaf, read_leaf_file
from rpent.recording.atomic import write_bytes_atomic
from rpent.recording.provenance import file_sha256

__all__ = ["MemoryCorpusError", "corpus_files", "write_manifest", "verify_manifest", "load_leaves",
           "build_index", "validate_corpus", "MANIFEST_SCHEMA"]

MANIFEST_SCHEMA = "rpent.memory.manifest/1"


class MemoryCorpusError(ValueError):
    """The corpus cannot be used; the message names the file and the fix."""


def corpus_files(corpus: Path) -> list[str]:
    """Relative POSIX paths of the published files (everything but the manifest, ``_internal/``,
    hidden files and lock files), sorted."""
    out = []
    for p in sorted(corpus.rglob("*")):
        rel = p.relative_to(corpus).as_posix()
        if not p.is_file() or rel == MANIFEST or rel.split("/")[0] == INTERNAL:
            continue
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        out.append(rel)
    return out


def write_manifest(corpus: Path) -> Path:
    """(Re)write ``manifest.json`` from the files on disk; returns its path."""
    files = {rel: file_sha256(corpus / rel) for rel in corpus_files(corpus)}
    doc = {"schema": MANIFEST_SCHEMA, "files": files}
    path = corpus / MANIFEST
    write_bytes_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return path


def verify_manifest(corpus: Path) -> dict[str, str]:
    """Check the corpus against its manifest; returns ``{relative path: sha256}``.

    Raises:
        MemoryCorpusError: no/invalid manifest, or a file that is changed, extra or missing
            (the first such file is named, with the fix).
    """
    path = corpus / MANIFEST
    if not path.is_file():
        raise MemoryCorpusError(f"memory corpus {corpus} has no {MANIFEST}; run `rpent-memory build-index "
                                f"--memory-dir {corpus.parent}` to publish it")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        files = dict(doc["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MemoryCorpusError(f"{path} is not a valid manifest ({exc}); rebuild it with `rpent-memory "
                                "build-index`") from None
    on_disk = corpus_files(corpus)
    for rel in on_disk:
        if rel not in files:
            raise MemoryCorpusError(f"memory corpus {corpus}: extra file {rel} is not in {MANIFEST}; remove it or "
                                    "publish it with `rpent-memory build-index`")
    for rel, digest in sorted(files.items()):
        p = corpus / rel
        if not p.is_file():
            raise MemoryCorpusError(f"memory corpus {corpus}: file {rel} listed in {MANIFEST} is missing")
        if file_sha256(p) != digest:
            raise MemoryCorpusError(f"memory corpus {corpus}: file {rel} was changed after publishing (sha256 "
                                    f"differs from {MANIFEST}); restore it or republish with `rpent-memory build-index`")
    return files


def load_leaves(corpus: Path) -> list[Leaf]:
    """Every ``*.md`` leaf of the tiers, parsed and validated, in tier then id order.

    Raises:
        LeafError: a leaf breaks the format (named).
    """
    leaves = []
    for tier in TIERS:
        d = corpus / tier
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.md")):
            leaf = parse_leaf(read_leaf_file(p), p.stem, p)
            leaf.extra["tier"] = tier
            leaves.append(leaf)
    return leaves


def build_index(corpus: Path) -> Path:
    """Rewrite ``MEMORY.md`` (one line per leaf: ``- [title](tier/id.md) — applies_when``),
    then the manifest. Returns the index path.

    Raises:
        LeafError: a leaf breaks the format.
    """
    corpus.mkdir(parents=True, exist_ok=True)
    lines = [f"# Task memory ({corpus.name})", "",
             "Read the leaves that apply before acting. Recipes give the step order; always re-perceive "
             "coordinates.", ""]
    for tier in TIERS:
        tier_leaves = [x for x in load_leaves(corpus) if x.extra["tier"] == tier]
        if not tier_leaves:
            continue
        lines.append(f"## {tier}")
        for leaf in tier_leaves:
            lines.append(f"- [{leaf.title()}]({tier}/{leaf.id}.md) — {leaf.applies_when()} "
                         f"({leaf.meta.get('confidence')}, {len(leaf.cells)} cell(s))")
        lines.append("")
    pairs = sorted(p.name for p in (corpus / "task-specific").glob("*_recipe.jsonl")) \
        if (corpus / "task-specific").is_dir() else []
    if pairs:
        lines.append("## task-specific recipes")
        lines.extend(f"- task-specific/{name}" for name in pairs)
        lines.append("")
    path = corpus / INDEX
    write_bytes_atomic(path, ("\n".join(lines).rstrip() + "\n").encode("utf-8"))
    write_manifest(corpus)
    return path


def validate_corpus(corpus: Path) -> list[str]:
    """Problems of a corpus, one line each (empty = valid): leaf format errors, duplicate ids
    across tiers, a manifest mismatch."""
    problems = []
    seen: dict[str, str] = {}
    for tier in TIERS:
        d = corpus / tier
        for p in sorted(d.glob("*.md")) if d.is_dir() else []:
            try:
                parse_leaf(read_leaf_file(p), p.stem, p)
            except LeafError as exc:
                problems.append(str(exc))
            if p.stem in seen:
                problems.append(f"{p}: id {p.stem!r} also used in {seen[p.stem]}/")
            seen.setdefault(p.stem, tier)
    try:
        verify_manifest(corpus)
    except MemoryCorpusError as exc:
        problems.append(str(exc))
    return problems
