"""Operator answers typed as text: one letter or the whole word, then optional notes.

The same answers in every operator front end: the TUI's verdict window takes one key per answer
(``ANSWER_KEYS``) and the terminal prompt of ``rpent --require-operator-verdict`` takes a line
``<answer> [notes]`` where ``<answer>`` is that letter or the word (``f`` or ``failure``), case
insensitive, an optional leading ``/`` ignored. No imports beyond the standard library.
"""

from __future__ import annotations

__all__ = ["ANSWER_KEYS", "parse_answer"]

#: The one-letter key of each operator answer (verdict: success, failure, continue, abort; scene reset: done, abort).
ANSWER_KEYS = {"success": "s", "failure": "f", "continue": "c", "abort": "a", "done": "d"}


def parse_answer(line: str, choices: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """``(answer, notes)`` for a typed line such as ``f cup tipped over`` or ``success looks placed``, when
    its first word is one of ``choices`` or its letter (``ANSWER_KEYS``); None otherwise (the caller asks again).
    ``succes`` (a common typo) counts as ``success``."""
    word, _, notes = (line or "").strip().partition(" ")
    word = word.lower().lstrip("/")
    if word == "succes":
        word = "success"
    letters = {ANSWER_KEYS[c]: c for c in choices if c in ANSWER_KEYS}
    answer = word if word in choices else letters.get(word)
    return (answer, notes.strip()) if answer is not None else None
