"""Image pruning before each model request (RPent reference §8).

Camera images dominate request size. Before each request the planner keeps images
newest-first while their decoded (raw PNG) bytes fit in a budget — default 4 MiB —
but always keeps the two newest; every older image becomes the text
:data:`OMITTED_NOTE`. The stored conversation is not modified.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALWAYS_KEEP", "OMITTED_NOTE", "prune_images"]

OMITTED_NOTE = "[earlier camera image omitted to bound request size]"
ALWAYS_KEEP = 2


def prune_images(messages: list[dict[str, Any]], budget_bytes: int,
                 always_keep: int = ALWAYS_KEEP) -> tuple[list[dict[str, Any]], int]:
    """Return a pruned copy of ``messages`` and the number of images omitted.

    Args:
        messages: neutral messages; image blocks are ``{"type": "image", "png": bytes, ...}``
            inside ``message["content"]``.
        budget_bytes: decoded image bytes to keep at most (beyond the ``always_keep`` newest).
        always_keep: newest images kept regardless of the budget.

    Newest means latest in conversation order (later messages, later blocks).
    """
    positions = [(mi, bi) for mi, m in enumerate(messages) if isinstance(m.get("content"), list)
                 for bi, b in enumerate(m["content"]) if b.get("type") == "image"]
    keep: set[tuple[int, int]] = set()
    used = 0
    for rank, (mi, bi) in enumerate(reversed(positions)):
        size = len(messages[mi]["content"][bi].get("png", b""))
        if rank < always_keep or used + size <= budget_bytes:
            keep.add((mi, bi))
            used += size
        else:
            # strict newest-first: once an image does not fit, all older ones go too
            break
    dropped = len(positions) - len(keep)
    if not dropped:
        return messages, 0
    out = []
    for mi, m in enumerate(messages):
        if not isinstance(m.get("content"), list) or not any(b.get("type") == "image" for b in m["content"]):
            out.append(m)
            continue
        blocks = [b if b.get("type") != "image" or (mi, bi) in keep else {"type": "text", "text": OMITTED_NOTE}
                  for bi, b in enumerate(m["content"])]
        out.append(dict(m, content=blocks))
    return out, dropped
