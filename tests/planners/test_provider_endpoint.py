"""The local provider endpoint, exercised with the official SDKs over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import anthropic
import openai
import pytest

from rpent.planners.provider_endpoint import Fault, Script, ScriptError, ToolCall, Turn, load_script

TOOLS_A = [{"name": "mcp__rpent__move_to", "description": "m", "input_schema": {"type": "object", "properties": {}}}]
TOOLS_R = [{"type": "function", "name": "move_to", "parameters": {"type": "object", "properties": {}}}]
TOOLS_C = [{"type": "function", "function": {"name": "move_to", "parameters": {"type": "object", "properties": {}}}}]
TURN = Turn(thinking="think first", text="moving now", tool_calls=(ToolCall("move_to", {"xyz": [0.1, 0.2, 0.3]}),))


def _anthropic(ep) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=ep.base_url, api_key="k", max_retries=0)


def _openai(ep) -> openai.OpenAI:
    return openai.OpenAI(base_url=ep.openai_base_url, api_key="k", max_retries=0)


def test_anthropic_json_and_sse_stream_parse_in_the_sdk(endpoint):
    ep = endpoint(Script([TURN, TURN]))
    msg = _anthropic(ep).messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}],
                                         tools=TOOLS_A)
    assert [b.type for b in msg.content] == ["thinking", "text", "tool_use"]
    assert msg.content[2].name == "mcp__rpent__move_to"  # bare script name mapped onto the MCP name
    assert msg.content[2].input == {"xyz": [0.1, 0.2, 0.3]} and msg.stop_reason == "tool_use"
    kinds = []
    with _anthropic(ep).messages.stream(model="m", max_tokens=64, tools=TOOLS_A,
                                        messages=[{"role": "user", "content": "hi"}]) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_message()
    assert {"message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"} <= set(kinds)
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].thinking == "think first" and final.content[1].text == "moving now"
    assert final.content[2].input == {"xyz": [0.1, 0.2, 0.3]} and final.usage.output_tokens > 0
    assert [r.stream for r in ep.requests] == [False, True]


def test_responses_json_and_sse_stream_parse_in_the_sdk(endpoint):
    ep = endpoint(Script([TURN, TURN]))
    resp = _openai(ep).responses.create(model="m", input="hi", tools=TOOLS_R)
    assert [i.type for i in resp.output] == ["reasoning", "message", "function_call"]
    assert json.loads(resp.output[2].arguments) == {"xyz": [0.1, 0.2, 0.3]}
    with _openai(ep).responses.stream(model="m", input="hi", tools=TOOLS_R) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds and "response.output_text.delta" in kinds
    assert final.output[1].content[0].text == "moving now" and final.usage.output_tokens > 0


def test_responses_namespaced_tools_get_namespace_and_bare_name(endpoint):
    ep = endpoint(Script([TURN]))
    tools = [{"type": "namespace", "name": "mcp__rpent", "description": "d", "tools": TOOLS_R}]
    resp = _openai(ep).responses.create(model="m", input="hi", tools=tools)
    call = resp.output[2]
    assert (call.namespace, call.name) == ("mcp__rpent", "move_to")
    assert ep.requests[0].tool_names == ["mcp__rpent__move_to"]


def test_chat_completions_json_and_stream(endpoint):
    ep = endpoint(Script([TURN, TURN]))
    client = _openai(ep)
    msg = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS_C)
    call = msg.choices[0].message.tool_calls[0]
    assert call.function.name == "move_to" and json.loads(call.function.arguments) == {"xyz": [0.1, 0.2, 0.3]}
    assert msg.choices[0].finish_reason == "tool_calls"
    chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                 tools=TOOLS_C, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    args = "".join(tc.function.arguments or "" for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or [])
    assert text == "moving now" and json.loads(args) == {"xyz": [0.1, 0.2, 0.3]}
    assert chunks[-1].usage.completion_tokens > 0


def test_faults_status_retry_after_and_error_bodies(endpoint):
    ep = endpoint(Script([Turn(fault=Fault(429, "slow down", retry_after_s=2)), Turn(fault=Fault(500)), TURN]))
    with pytest.raises(anthropic.RateLimitError) as exc:
        _anthropic(ep).messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}], tools=TOOLS_A)
    assert exc.value.response.headers["retry-after"] == "2" and "slow down" in str(exc.value)
    with pytest.raises(openai.InternalServerError):
        _openai(ep).responses.create(model="m", input="x", tools=TOOLS_R)
    assert [r.status for r in ep.requests] == [429, 500]


def test_reject_images_answers_400_without_consuming_a_turn(endpoint):
    ep = endpoint(Script([TURN], reject_images=True))
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(openai.BadRequestError, match="image input is not supported"):
        _openai(ep).chat.completions.create(model="m", tools=TOOLS_C, messages=[
            {"role": "user", "content": [{"type": "text", "text": "look"}, image]}])
    ok = _openai(ep).chat.completions.create(model="m", tools=TOOLS_C, messages=[{"role": "user", "content": "x"}])
    assert ok.choices[0].message.tool_calls and ep.requests[0].image_count == 1 and ep.requests[1].turn_index == 0


def test_api_key_required_when_configured(endpoint):
    ep = endpoint(Script([TURN]), api_key="right")
    with pytest.raises(anthropic.AuthenticationError):
        _anthropic(ep).messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    headers = ep.requests[0].headers
    assert "<redacted>" in (headers.get("x-api-key"), headers.get("authorization")) and ep.requests[0].status == 401


def test_responder_function_sees_tool_results_and_delay(endpoint):
    seen = []

    def responder(req):
        seen.append(req)
        return Turn(text="late", delay_s=0.3)

    ep = endpoint(responder)
    t0 = time.monotonic()
    _anthropic(ep).messages.create(model="m", max_tokens=8, tools=TOOLS_A, messages=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "mcp__rpent__move_to", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": '{"ok": 1}'},
                                     {"type": "text", "text": "[operator] left"}]}])
    assert time.monotonic() - t0 >= 0.3
    (req,) = seen
    assert req.tool_results[0].call_id == "t1" and req.tool_results[0].json() == {"ok": 1}
    assert req.last_user_text == "[operator] left"


def test_script_files_and_transcript_replay(tmp_path):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"turns": [{"text": "a", "tool_calls": [{"name": "finish", "args": {"status": "ok"}}]},
                                          {"fault": {"status": 429, "retry_after_s": 1}}]}))
    script = load_script(path)
    assert script.turns[0].tool_calls[0].args == {"status": "ok"} and script.turns[1].fault.retry_after_s == 1
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "task"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "mcp__rpent__move_to",
                                           "input": {"xyz": [1, 2, 3]}}]}]}))
    replay = load_script(path)
    assert replay.turns[0].tool_calls[0] == ToolCall("move_to", {"xyz": [1, 2, 3]})
    path.write_text(json.dumps({"turns": [{"txt": "typo"}]}))
    with pytest.raises(ScriptError, match=r"turns\[0\]: unknown keys \['txt'\]"):
        load_script(path)
    with pytest.raises(ScriptError, match="not found"):
        load_script(tmp_path / "missing.json")


def test_cli_serves_a_script_and_records_requests(tmp_path):
    script = tmp_path / "conv.json"
    script.write_text(json.dumps({"turns": [{"text": "hello from the script"}]}))
    record = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "rpent.planners.provider_endpoint", "--script", str(script),
                             "--port", "0", "--record", str(record)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("provider endpoint listening on http://127.0.0.1:")
        url = line.split()[4]
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        msg = client.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}],
                                     tools=TOOLS_A)
        assert msg.content[0].text == "hello from the script"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        proc.stdout.close()
    entry = json.loads(record.read_text().splitlines()[0])
    assert entry["api"] == "anthropic" and entry["body"]["messages"][0]["content"] == "x"
    bad = subprocess.run([sys.executable, "-m", "rpent.planners.provider_endpoint", "--script",
                          str(tmp_path / "nope.json")], capture_output=True, text=True)
    assert bad.returncode == 2 and "script file not found" in bad.stderr


def test_a_non_utf8_or_directory_script_is_a_script_error_naming_it(tmp_path):
    garbled = tmp_path / "conv.json"
    garbled.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ScriptError, match=r"conv.json is not UTF-8 text \(invalid start byte at byte 0\)"):
        load_script(garbled)
    with pytest.raises(ScriptError, match="is a directory; pass the JSON file"):
        load_script(tmp_path)
    bad = subprocess.run([sys.executable, "-m", "rpent.planners.provider_endpoint", "--script", str(garbled)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "is not UTF-8 text" in bad.stderr


def test_a_bad_or_taken_port_is_one_line_without_traceback(tmp_path):
    import socket

    script = tmp_path / "conv.json"
    script.write_text(json.dumps({"turns": [{"text": "hi"}]}))
    cmd = [sys.executable, "-m", "rpent.planners.provider_endpoint", "--script", str(script)]
    bad = subprocess.run(cmd + ["--port", "99999"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "argument --port: 99999 is not a TCP port; give 0-65535 (0 picks a free one)" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = subprocess.run(cmd + ["--port", str(port)], capture_output=True, text=True, timeout=60)
    assert busy.returncode == 2 and "Traceback" not in busy.stderr, busy.stderr
    assert busy.stderr.strip() == (f"error: cannot listen on 127.0.0.1:{port}: Address already in use; "
                                   "choose another --port (0 picks a free one) or --host")
