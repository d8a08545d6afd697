"""The terminal verdict prompt of ``rpent --require-operator-verdict`` takes the same single-letter answers
as the TUI's verdict window (``s``/``f``/``c``/``a``, then optional notes)."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from rpent.robots.libero.toolkit import TerminalOperator
from rpent.session.operator import ANSWER_KEYS as TUI_KEYS
from rpent.toolkit.answers import ANSWER_KEYS, parse_answer

VERDICT = ("success", "failure", "continue", "abort")


def test_letters_and_words_parse_to_the_same_answers():
    assert TUI_KEYS is ANSWER_KEYS  # one table for the TUI window and the terminal prompt
    assert parse_answer("f operator rejects", VERDICT) == ("failure", "operator rejects")
    assert parse_answer("S", VERDICT) == ("success", "")
    assert parse_answer("/abort  stuck  ", VERDICT) == ("abort", "stuck")
    assert parse_answer("continue", VERDICT) == ("continue", "")
    assert parse_answer("d", VERDICT) is None  # done is a scene-reset answer, not a verdict
    assert parse_answer("d", ("done", "abort")) == ("done", "")
    assert parse_answer("x", VERDICT) is None and parse_answer("", VERDICT) is None


def test_terminal_operator_takes_one_letter_after_a_refused_line():
    out = io.StringIO()
    operator = TerminalOperator(io.StringIO("maybe\nf cup tipped over\n"), out)
    assert operator.ask("verdict", "Did it succeed?", VERDICT, {}) == ("failure", "cup tipped over")
    text = out.getvalue()
    assert "s=success f=failure c=continue a=abort" in text
    assert "invalid operator response 'maybe'; type one of: s=success" in text


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_rpent_verdict_prompt_accepts_f_on_a_real_terminal(tmp_path):
    """A real LIBERO scripted run on a pty: the prompt is answered ``f operator rejects``."""
    out = tmp_path / "run"
    master, slave = pty.openpty()
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.Popen([sys.executable, "-m", "rpent.cli.main", "--robot", "libero", "--suite", "libero_object",
                             "--task", "0", "--seed", "0", "--planner", "scripted", "--require-operator-verdict",
                             "--no-video", "--output-dir", str(out)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + 840
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
            if not answered and b"then optional notes:" in seen:
                os.write(master, b"f operator rejects\n")
                answered = True
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = seen.decode(errors="replace")
    assert answered, text[-3000:]
    assert "invalid operator response" not in text, text[-3000:]
    transcript = json.loads(next(out.glob("transcript_*.json")).read_text())
    assert transcript["operator_verdict"]["answer"] == "failure"
    assert transcript["operator_verdict"]["notes"] == "operator rejects"
    assert transcript["label"] == "failed"
