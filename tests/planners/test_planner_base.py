"""Planner contract pieces: content conversion, steering, registry, image pruning, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from planner_fixture_toolkit import noisy_png, png_bytes

from rpent.planners.api.errors import ProviderError, backoff_s
from rpent.planners.api.images import OMITTED_NOTE, prune_images
from rpent.planners.api.model_spec import parse_model_spec, resolve_provider
from rpent.planners.base import PlannerConfig, PlannerConfigError, create_planner, planner_class, register_planner
from rpent.planners.content import MAX_RESULT_TEXT_BYTES, finish_of, result_text, to_tool_content, transcript_blocks
from rpent.planners.steering import HELP_TEXT, Steering


# -- content ------------------------------------------------------------------------------
def test_result_text_is_capped_at_60000_bytes_with_marker():
    big = {"log": "é" * 40_000}  # 80 000 bytes of UTF-8
    text = result_text(big)
    assert text.endswith("\n[truncated]")
    body = text[: -len("\n[truncated]")]
    assert len(body.encode("utf-8")) <= MAX_RESULT_TEXT_BYTES
    small = {"ok": 1}
    assert json.loads(result_text(small)) == small


def test_tool_content_splits_images_and_flags_errors():
    png = png_bytes(1)
    content = to_tool_content({"step": 3, "_images": [{"label": "agentview", "png": png}, {"label": "bad"}]})
    assert json.loads(content.blocks[0]["text"]) == {"step": 3}  # _images never in the text
    assert [b["label"] for b in content.images] == ["agentview"]
    assert content.images[0]["png"] == png
    assert "[image 'bad' missing PNG bytes]" in [b.get("text") for b in content.blocks]
    assert not content.is_error and content.finish is None
    ref = transcript_blocks(content.blocks)[1]
    assert "png" not in ref and ref["bytes"] == len(png) and ref["ref"].startswith("sha256:")
    no_img = to_tool_content({"_images": [{"label": "wrist", "png": png}]}, no_images=True)
    assert no_img.images == [] and "[image 'wrist' not sent: --no-images]" in [b.get("text") for b in no_img.blocks]


def test_finish_accepted_only_without_error():
    assert finish_of({"_finish": True, "status": "success", "summary": "s"}) == ("success", "s")
    assert finish_of({"_finish": True, "error": "finish refused"}) is None
    assert finish_of({"error": "finish refused"}) is None
    assert to_tool_content({"error": "finish refused"}).is_error


# -- steering -----------------------------------------------------------------------------
def test_steering_queue_commands_and_listeners():
    s = Steering()
    cancels = []
    remove = s.add_interrupt_listener(lambda: cancels.append(1))
    assert s.submit("/help") == HELP_TEXT
    assert s.submit("go left") is None and s.submit("  ") is None
    assert s.submit("/bogus").startswith("unknown command /bogus")
    assert s.drain() == ["go left"] and s.drain() == []
    assert "Cancelling" in s.submit("/interrupt")
    assert cancels == [1] and not s.stop_requested and s.interrupt_count == 1
    s.submit("/quit")
    assert cancels == [1, 1] and s.stop_requested and s.stop_reason == "operator quit"
    remove()
    s.interrupt()
    assert cancels == [1, 1]
    with pytest.raises(ValueError, match="empty"):
        s.send("   ")


def test_steering_wait_for_input_wakes_on_line_from_another_thread():
    s = Steering(interactive=True)
    assert s.wait_for_input(0.05) is False
    threading.Timer(0.1, s.send, args=("next",)).start()
    t0 = time.monotonic()
    assert s.wait_for_input(120) is True  # woken by the line, not by the (120 s) timeout
    assert time.monotonic() - t0 < 60 and s.pending == 1


# -- registry and config ------------------------------------------------------------------
def test_registry_errors_name_the_fix():
    with pytest.raises(PlannerConfigError, match="unknown planner 'nope'; choose one of: api, claude_code, codex"):
        planner_class("nope")
    register_planner("broken_for_test", "rpent.planners.no_such_module:X")
    with pytest.raises(PlannerConfigError, match="cannot be loaded"):
        planner_class("broken_for_test")
    with pytest.raises(ValueError, match="module:ClassName"):
        register_planner("x", "no_colon")
    with pytest.raises(PlannerConfigError, match="requires a model id"):
        create_planner("api", PlannerConfig(model=None))
    with pytest.raises(PlannerConfigError, match="no provider prefix"):
        parse_model_spec("claude-sonnet-4-5")
    with pytest.raises(PlannerConfigError, match="unsupported provider 'gemini'"):
        parse_model_spec("gemini:x")
    with pytest.raises(PlannerConfigError, match="ANTHROPIC_API_KEY is not set"):
        resolve_provider(PlannerConfig(model="anthropic:m", env={"ANTHROPIC_API_KEY": ""}))
    with pytest.raises(PlannerConfigError, match="--max-turns must be an integer >= 1"):
        PlannerConfig(max_turns=0).validate()
    with pytest.raises(PlannerConfigError, match="--reasoning-effort must be one of"):
        PlannerConfig(reasoning_effort="extreme").validate()
    with pytest.raises(PlannerConfigError, match="--base-url applies to --planner api only"):
        create_planner("claude_code", PlannerConfig(base_url="http://x"))
    with pytest.raises(PlannerConfigError, match="--no-images applies to --planner api only"):
        create_planner("codex", PlannerConfig(no_images=True))


def test_resolve_provider_prefers_flag_over_env():
    cfg = PlannerConfig(model="openai-chat:glm", base_url="http://127.0.0.1:9/v1",
                        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://elsewhere/v1"})
    s = resolve_provider(cfg)
    assert (s.spec.provider, s.spec.id, s.api_key, s.base_url) == ("openai-chat", "glm", "k", "http://127.0.0.1:9/v1")
    cfg.base_url = None
    assert resolve_provider(cfg).base_url == "http://elsewhere/v1"


def test_importing_the_planner_contract_imports_no_sdk():
    code = ("import sys, rpent.planners.base, rpent.planners.api, rpent.planners.provider_endpoint;"
            "print([m for m in ('anthropic','openai','claude_agent_sdk','openai_codex','mcp') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- image pruning ------------------------------------------------------------------------
def _img_msg(png: bytes) -> dict:
    return {"role": "tool", "tool_call_id": "c", "name": "t",
            "content": [{"type": "text", "text": "{}"}, {"type": "image", "label": "a", "png": png, "ref": "r"}]}


def test_prune_keeps_newest_within_budget_and_always_two():
    imgs = [noisy_png(i, 24) for i in range(5)]
    size = len(imgs[0])
    msgs = [{"role": "user", "content": [{"type": "text", "text": "task"}]}] + [_img_msg(p) for p in imgs]
    pruned, dropped = prune_images(msgs, budget_bytes=3 * size + 10)
    kept = [b["png"] for m in pruned for b in m["content"] if b["type"] == "image"]
    assert dropped == 2 and kept == imgs[2:]
    assert [b["text"] for b in pruned[1]["content"]][1] == OMITTED_NOTE
    assert msgs[1]["content"][1]["type"] == "image"  # the stored conversation is untouched
    pruned, dropped = prune_images(msgs, budget_bytes=0)
    assert dropped == 3 and [b["png"] for m in pruned for b in m["content"] if b["type"] == "image"] == imgs[3:]
    same, dropped = prune_images(msgs, budget_bytes=10 * size)
    assert dropped == 0 and same is msgs


# -- provider errors ----------------------------------------------------------------------
def test_provider_error_hint_and_backoff():
    err = ProviderError("image input is not supported by this model", 400, "bad_request", provider="openai-chat")
    assert "--no-images" in str(err) and "HTTP 400" in str(err)
    assert "--no-images" not in str(ProviderError("image too large", 500, "server"))
    assert backoff_s(0, None) == 1.0 and backoff_s(3, None) == 8.0 and backoff_s(10, None) == 30.0
    assert backoff_s(0, 2.5) == 2.5 and backoff_s(0, 500.0) == 60.0


def test_stdin_reader_feeds_steering_and_stops_on_quit():
    import io
    import os

    from rpent.planners.terminal import StdinSteeringReader, edit_initial_prompt

    r, w = os.pipe()
    steering, out = Steering(), io.StringIO()
    with os.fdopen(r, "r") as rs, os.fdopen(w, "w") as ws:
        reader = StdinSteeringReader(steering, stream=rs, out=out).start()
        ws.write("move the bowl first\n/help\n/quit\nnever read\n")
        ws.flush()
        reader.thread.join(60)
    assert not reader.thread.is_alive()
    assert steering.drain() == ["move the bowl first"] and steering.stop_reason == "operator quit"
    assert "/interrupt" in out.getvalue() and "Stopping the run." in out.getvalue()
    assert edit_initial_prompt("keep me", stream=io.StringIO()) == "keep me"  # not a TTY: unchanged


def test_timeout_default_chain():
    from rpent.planners.base import resolve_timeout_s

    assert resolve_timeout_s("api", 30.0, {"CELL_TIMEOUT_S": "5"}) == 30.0
    assert resolve_timeout_s("codex", None, {"CODEX_TIMEOUT_S": "7", "CELL_TIMEOUT_S": "5"}) == 7.0
    assert resolve_timeout_s("api", None, {"CODEX_TIMEOUT_S": "7", "CELL_TIMEOUT_S": "5"}) == 5.0
    assert resolve_timeout_s("claude_code", None, {}) == 1200.0
    assert resolve_timeout_s("api", None, {"CELL_TIMEOUT_S": "5"}, interactive=True) is None
    with pytest.raises(PlannerConfigError, match="CELL_TIMEOUT_S must be a positive number"):
        resolve_timeout_s("api", None, {"CELL_TIMEOUT_S": "soon"})
