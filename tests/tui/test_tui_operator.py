"""TuiOperator: blocking ask from a worker thread, answered from another thread; errors; cancel; log."""

import json
import threading
import time

import pytest

from rpent.session.operator import OperatorBusyError, OperatorReplyError, TuiOperator


def _ask_in_thread(op, *args):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", op.ask(*args)))
    t.start()
    deadline = time.monotonic() + 60
    while op.pending is None:
        assert time.monotonic() < deadline, "the ask never became pending"
        time.sleep(0.005)
    return t, out


def test_verdict_answered_with_notes_and_logged(tmp_path):
    seen = []
    op = TuiOperator(on_request=seen.append, log_path=tmp_path / "op.jsonl")
    t, out = _ask_in_thread(op, "verdict", "Is the bowl on the plate?", None, {"main": b"png"})
    req = op.pending
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        time.sleep(0.005)
    assert req.choices == ("success", "failure", "continue", "abort") and req.frames == {"main": b"png"}
    assert seen == [req]
    with pytest.raises(OperatorReplyError, match="invalid operator response 'done'; choose one of: success"):
        op.reply(req.id, "done")
    with pytest.raises(OperatorReplyError, match="expired or already answered"):
        op.reply("op-9999", "success")
    op.reply(req.id, "success", "  looks right ")
    t.join(60)
    assert out["r"] == ("success", "looks right")
    with pytest.raises(OperatorReplyError, match="expired or already answered"):
        op.reply(req.id, "failure")
    log = [json.loads(x) for x in (tmp_path / "op.jsonl").read_text().splitlines()]
    assert [e["event"] for e in log] == ["request", "reply"]
    assert log[1]["answer"] == "success" and log[1]["notes"] == "looks right"


def test_scene_reset_choices_and_one_request_at_a_time():
    op = TuiOperator()
    t, out = _ask_in_thread(op, "scene_reset", "Reset the scene", None, None)
    assert op.pending.choices == ("done", "abort")
    with pytest.raises(OperatorBusyError, match="another operator confirmation is pending"):
        op.ask("verdict", "second")
    op.reply(op.pending.id, "done")
    t.join(60)
    assert out["r"] == ("done", "")


def test_cancel_releases_a_waiting_ask_with_abort():
    op = TuiOperator()
    t, out = _ask_in_thread(op, "verdict", "q", None, None)
    op.cancel()
    t.join(60)  # the ask has no timeout of its own: only the cancel can release it
    assert not t.is_alive() and out["r"][0] == "abort"
    assert op.ask("verdict", "after cancel")[0] == "abort"
