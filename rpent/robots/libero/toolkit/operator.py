"""Episode-ending and operator tools: ``finish``, ``request_operator_verdict``,
``request_scene_reset``; and the default terminal :class:`TerminalOperator`.

The operator interface (docs/interfaces.md, "Run layer"): ``ask(request_kind, prompt, choices,
frames) -> (answer, notes)``, blocking, called from the toolkit's thread. Choices: a verdict
-> ``success | failure | continue | abort``; a scene reset -> ``done | abort`` (RPent reference
§3.3, §7). Every request and answer is appended to ``operator_events.jsonl``.

``finish`` never decides success on its own. With ``require_operator_verdict`` (the real-robot
rule, usable in simulation) ``finish`` is refused until the operator gave a final verdict
(``success``, ``failure`` or ``abort``); the run's label then follows the operator (docs/concepts.md,
"Run"). The verdict answers mean:

* ``success``: recorded; the planner may now ``finish``.
* ``failure`` / ``abort``: recorded, and the episode ends at once (the tool result carries
  ``_finish``; the toolkit's ``finish_result`` is the operator's, ``by: "operator"``).
* ``continue``: the task is not done; the planner keeps working (an earlier final verdict is
  withdrawn) and must ask again before ``finish``.

Every answer is kept in :attr:`OperatorTools.operator_verdicts` as ``{"answer", "notes", "time"
(s since the epoch), "asked_by", "request_id", "question", "evidence_step"}``; the last final
one is :attr:`operator_verdict_record` (the run layer writes it to the transcript).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from typing import Annotated, Protocol

from pydantic import Field

from rpent.toolkit.answers import ANSWER_KEYS, parse_answer
from rpent.toolkit.registry import tool

__all__ = ["Operator", "TerminalOperator", "NoOperator", "OperatorTools", "VERDICT_CHOICES", "RESET_CHOICES",
           "FINAL_VERDICTS", "evidence_frames"]

VERDICT_CHOICES = ("success", "failure", "continue", "abort")
RESET_CHOICES = ("done", "abort")


class Operator(Protocol):
    """A person who answers verdict and scene-reset requests."""

    def ask(self, request_kind: str, prompt: str, choices: tuple[str, ...], frames: dict) -> tuple[str, str]:
        """Block until the operator answers; returns (answer in choices, notes)."""


class NoOperator:
    """Used when nobody can answer (non-interactive runs): every request fails with a clear error."""

    def ask(self, request_kind, prompt, choices, frames):  # noqa: D102
        raise RuntimeError("no operator attached to this run (stdin is not a terminal); "
                           "run rpent interactively or from rpent-tui to answer operator requests")


class TerminalOperator:
    """Asks on the controlling terminal: ``<answer> [notes]``, the answer as its letter or word
    (``f cup tipped over``, ``success looks placed``; ``rpent.toolkit.answers.parse_answer``, the same
    letters as the TUI's verdict window).

    Args:
        stream_in, stream_out: text streams (default stdin/stdout).
    """

    def __init__(self, stream_in=None, stream_out=None) -> None:
        self.stream_in = stream_in or sys.stdin
        self.stream_out = stream_out or sys.stdout
        self._lock = threading.Lock()

    def ask(self, request_kind, prompt, choices, frames):  # noqa: D102
        options = " ".join(f"{ANSWER_KEYS[c]}={c}" if c in ANSWER_KEYS else c for c in choices)
        with self._lock:
            while True:
                self.stream_out.write(f"\n[operator {request_kind}] {prompt}\n  answer {options}, then optional notes: ")
                self.stream_out.flush()
                line = self.stream_in.readline()
                if not line:
                    raise RuntimeError("operator input closed before an answer was given")
                parsed = parse_answer(line, choices)
                if parsed is not None:
                    return parsed
                self.stream_out.write(f"  invalid operator response {line.strip().split(' ')[0]!r}; type one of: "
                                      f"{options} (the letter or the word)\n")


def evidence_frames(record, step_idx: int) -> dict[str, bytes]:
    """The camera frames an operator request shows: ``{"agentview": png, "wrist": png}`` of step
    ``step_idx`` of ``record`` (a :class:`rpent.run.record.RunRecord`; 256 px PNGs, natural
    orientation). Cameras without a stored frame are left out."""
    frames = {}
    for cam in ("agentview", "wrist"):
        path = record.artifact_path(f"{cam}.png", step_idx)
        if path.exists():
            frames[cam] = path.read_bytes()
    return frames


#: Verdict answers that end the operator's judgement (``continue`` does not).
FINAL_VERDICTS = ("success", "failure", "abort")


class OperatorTools:
    """Mixin of :class:`rpent.robots.libero.toolkit.LiberoToolkit`: finish and operator requests.

    Attributes (set by the toolkit's ``__init__``): ``operator_verdict`` (the last final answer
    or None), ``operator_verdict_record`` (its full record), ``operator_verdicts`` (every answer,
    ``continue`` included), ``asker`` (who asks: the planner kind, set by the run layer).
    """

    operator_verdict: str | None = None
    operator_verdict_record: dict | None = None
    asker: str = "planner"

    def _operator_event(self, event: dict) -> None:
        event = {"t": time.time(), **event}
        with open(self.record.dir / "operator_events.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event, ensure_ascii=False) + "\n")
            fh.flush()

    def _ask(self, kind: str, prompt: str, choices: tuple[str, ...]) -> tuple[str, str, str]:
        rid = f"op_{uuid.uuid4().hex[:8]}"
        idx = len(self.record.steps) - 1
        frames = evidence_frames(self.record, idx)
        self._operator_event({"id": rid, "kind": "request", "request_kind": kind, "prompt": prompt,
                              "choices": list(choices), "evidence_step": idx})
        self._emit({"kind": "operator_request", "id": rid, "request_kind": kind, "prompt": prompt,
                    "choices": list(choices)})
        answer, notes = self.operator.ask(kind, prompt, choices, frames)
        if answer not in choices:
            raise ValueError(f"invalid operator response {answer!r}; expected one of {choices}")
        self._operator_event({"id": rid, "kind": "reply", "answer": answer, "notes": notes})
        self._emit({"kind": "operator_reply", "id": rid, "answer": answer, "notes": notes})
        return rid, answer, notes

    @tool(readonly=True)
    def finish(self, status: Annotated[str, Field(min_length=1, description="your assessment: success, failure, stuck or unsupported")],
               summary: Annotated[str, Field(description="what was done and why you stop")] = "") -> dict:
        """End the task. The environment's own success predicate decides success; your status
        is recorded as a claim. May be refused (then continue working)."""
        if self.finish_result is not None and self.finish_result.get("by") == "operator":
            return {"error": f"finish refused: the episode already ended by the operator's verdict "
                             f"({self.finish_result['status']})", "code": "episode_over"}
        if self.require_operator_verdict and self.operator_verdict is None:
            return {"error": "finish refused; request_operator_verdict first (finish needs the operator's "
                             "final verdict: success, failure or abort)"}
        # the predicate first: when it cannot be read (env server gone) the call fails and this
        # finish is refused, so it never becomes the run's finish (the record would contradict itself)
        success = self.solved()
        self.finish_result = {"status": status, "summary": summary, "by": "planner"}
        out = {"_finish": True, "status": status, "summary": summary, "environment_success": success}
        if self.operator_verdict is not None:
            out["operator_verdict"] = self.operator_verdict
        return out

    @tool(readonly=True)
    def request_operator_verdict(self, question: Annotated[str, Field(min_length=1, description="what the operator should judge")]) -> dict:
        """Ask the human operator to judge the current scene. Blocks until answered. Returns
        status (success | failure | continue | abort), operator_notes, evidence_step. ``failure``
        and ``abort`` end the episode; ``continue`` means keep working and ask again later."""
        rid, answer, notes = self._ask("verdict", question, VERDICT_CHOICES)
        evidence = len(self.record.steps) - 1
        verdict = {"answer": answer, "notes": notes, "time": time.time(), "asked_by": self.asker,
                   "request_id": rid, "question": question, "evidence_step": evidence}
        self.operator_verdicts.append(verdict)
        out = {"status": answer, "operator_notes": notes, "request_id": rid, "evidence_step": evidence,
               "operator_aborted": answer == "abort"}
        if answer in FINAL_VERDICTS:
            self.operator_verdict, self.operator_verdict_record = answer, verdict
        else:  # continue: not done; an earlier final verdict no longer holds
            self.operator_verdict = self.operator_verdict_record = None
            out["instruction"] = ("the operator says the task is not done: keep working, then ask for a "
                                  "verdict again before finish")
        if answer in ("failure", "abort"):
            summary = f"ended by the operator's verdict: {answer}" + (f" ({notes})" if notes else "")
            self.finish_result = {"status": answer, "summary": summary, "by": "operator"}
            out.update(_finish=True, summary=summary)
        return out

    @tool()
    def request_scene_reset(self, reason: Annotated[str, Field(min_length=1)],
                            expected_scene_state: str = "") -> dict:
        """Ask the operator to confirm a scene reset (done | abort); in simulation the episode
        then restarts from its init state. Blocks until answered."""
        prompt = reason + (f" (expected: {expected_scene_state})" if expected_scene_state else "")
        rid, answer, notes = self._ask("scene_reset", prompt, RESET_CHOICES)
        if answer != "done":
            return {"error": "scene reset not confirmed", "operator_notes": notes, "request_id": rid}
        self.reset_episode()
        return {"status": "reset", "operator_notes": notes, "request_id": rid}
