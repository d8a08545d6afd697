"""``rpent-memory``: check, merge and index a task memory corpus (RPent reference §6.2).

Examples::

    rpent-memory --memory-dir memory validate
    rpent-memory --memory-dir memory merge --cell object_t0_s0 --solved
    rpent-memory --memory-dir memory build-index

``--robot`` picks the corpus ``<memory dir>/<robot>/`` (default libero). Exit codes: 0 ok,
1 validate found problems, 2 bad input or refused merge (one line naming the problem).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-memory`` parser."""
    codes = "Exit codes: 0 ok, 1 validate found problems, 2 bad input or refused merge (one line naming the problem)."
    p = argparse.ArgumentParser(prog="rpent-memory", description="Validate, merge and index a task memory corpus.",
                                epilog=codes)
    p.add_argument("--memory-dir", default=None, help="memory root (default $RPENT_MEMORY_DIR, else ./memory)")
    p.add_argument("--robot", default="libero", help="corpus <memory dir>/<robot> (default libero)")
    # the same two options after the subcommand too (``rpent-memory build-index --memory-dir DIR``);
    # SUPPRESS keeps a value given before the subcommand when they are not repeated after it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--memory-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("--robot", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("validate", parents=[common], help="check every leaf's format and the manifest of file hashes",
                   epilog=codes)
    m = sub.add_parser("merge", parents=[common], help="merge _internal/inbox/<cell>/ into the corpus under a file lock",
                       epilog=codes)
    m.add_argument("--cell", required=True, help="cell tag, e.g. object_t0_s0")
    m.add_argument("--solved", action="store_true",
                   help="the cell was solved: also publish its audit + recipe pair to task-specific/")
    sub.add_parser("build-index", parents=[common], help="rewrite MEMORY.md and manifest.json from the leaves on disk",
                   epilog=codes)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns 0 / 1 / 2 (module docstring)."""
    args = build_parser().parse_args(argv)
    from rpent.memory.corpus import MemoryCorpusError, build_index, validate_corpus
    from rpent.memory.layout import corpus_dir
    from rpent.memory.leaf import LeafError
    from rpent.memory.merge import MergeError, merge_inbox

    corpus = corpus_dir(args.memory_dir, args.robot)
    try:
        if args.command == "validate":
            if not corpus.is_dir():
                raise MemoryCorpusError(
                    f"no memory corpus at {corpus}: give the memory root that holds <robot>/MEMORY.md with "
                    f"--memory-dir, or create one (an exploration run with --explore, or "
                    f"`rpent-memory --memory-dir {corpus.parent} build-index` over leaves you wrote)")
            problems = validate_corpus(corpus)
            for line in problems:
                print(f"rpent-memory: {line}")
            print(f"rpent-memory: {corpus}: {'valid' if not problems else f'{len(problems)} problem(s)'}")
            return 1 if problems else 0
        if args.command == "merge":
            report = merge_inbox(corpus, args.cell, solved=args.solved)
            print(json.dumps(report.to_dict(), indent=1))
            return 0
        path = build_index(corpus)
        print(f"rpent-memory: wrote {path} and {corpus / 'manifest.json'}")
        return 0
    except (MemoryCorpusError, MergeError, LeafError, OSError) as exc:
        print(f"rpent-memory: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
