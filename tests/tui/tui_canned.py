"""A canned session for SVG snapshots and screenshots: fixed services, a TaskRun with transcript,
timeline and frames, and two recorded runs on disk (written by the real writers)."""

from __future__ import annotations

from pathlib import Path

from rpent_tui.app import AppOptions, RpentApp
from rpent.session.commands import TaskCommand
from rpent.session.operator import OperatorRequest
from rpent.session.core import Session
from rpent.session.model import ServiceView, SessionConfig, TaskRunView
from tui_records import build_run, gradient, png

TRANSCRIPT = [
    {"kind": "status", "state": "running", "detail": "put the black bowl on the plate"},
    {"kind": "planner", "event": "thinking", "text": "The bowl is left of the plate; segment both first."},
    {"kind": "planner", "event": "text", "text": "I will locate the bowl and the plate."},
    {"kind": "planner", "event": "tool_call", "name": "segment", "args": {"prompt": "black bowl"}, "call_id": "c1"},
    {"kind": "planner", "event": "tool_result", "call_id": "c1", "result": {"found": True, "world_xyz": [0.12, -0.05, 0.91]}},
    {"kind": "planner", "event": "tool_call", "name": "pi0_pick", "args": {"instruction": "pick up the black bowl"}, "call_id": "c2"},
    {"kind": "planner", "event": "tool_result", "call_id": "c2", "result": {"success": True, "steps_used": 48}},
    {"kind": "planner", "event": "tool_call", "name": "move_to", "args": {"xyz": [0.3, 0.1, 1.05]}, "call_id": "c3"},
    {"kind": "planner", "event": "tool_result", "call_id": "c3", "result": {"error": "target out of reach", "code": "bad_args"}},
    {"kind": "planner", "event": "operator_message", "text": "approach the plate from above"},
    {"kind": "planner", "event": "request", "prompt": "Is the bowl on the plate?", "choices": ["success", "failure", "continue", "abort"]},
]


def canned_app(root: Path, start_mode: str = "run", colour_depth: str = "truecolor") -> RpentApp:
    """The canned app; ``root`` must be the current directory (paths shown are relative). ``colour_depth``
    is fixed (default truecolor), so captures do not depend on the terminal the tests run in."""
    build_run(Path("logs"), "0001_libero_goal_t0_s0", steps=4)
    build_run(Path("logs"), "0002_libero_object_t3_s1", suite="libero_object", task=3, seed=1, success=False,
              trajectory=False, steps=3, verdict={"answer": "success", "notes": "bowl rests on the rim"},
              label="succeeded")

    def make(sink):
        session = Session(SessionConfig(output_dir=Path("session"), planner="api", model="anthropic:claude-opus-4-8"),
                          sink, shared_specs=[])
        session.state = "ready"
        session.services = {
            "vla": ServiceView("vla", state="ready", endpoint="http://127.0.0.1:8220", pid=4242),
            "sam3": ServiceView("sam3", state="failed", last_error="exit code 1: SAM3_CHECKPOINT_PATH is not set"),
            "env_server@0002": ServiceView("env_server@0002", scope="0002", state="ready",
                                           endpoint="http://127.0.0.1:40111", pid=5151),
        }
        session.services["vla"].lines.extend(f"[vla] batch {i}: 1 request(s), 38.{i} ms" for i in range(30))
        session.services["vla"].lines.append("ERROR cuda graph capture skipped (cpu)")
        old = TaskRunView("0001", TaskCommand("libero_goal", 0, 0), Path("session/tasks/0001_libero_goal_t0_s0"),
                          state="cancelled", detail="replaced by libero_goal task 1 seed 0")
        run = TaskRunView("0002", TaskCommand("libero_goal", 1, 0), Path("session/tasks/0002_libero_goal_t1_s0"),
                          state="running", detail="put the black bowl on the plate")
        for event in TRANSCRIPT:
            run.apply(event)
        for i in range(23):
            run.apply({"kind": "step", "step": i, "terminated": False, "truncated": False, "success": False,
                       "tool": "pi0_pick" if i < 20 else "move_to"})
        run.apply({"kind": "frames", "step": 22, "main": png(gradient(2, 128)), "wrist": png(gradient(5, 128))})
        run.apply({"kind": "planner", "event": "usage", "input_tokens": 48211, "output_tokens": 1893, "tool_calls": 3})
        session.runs = [old, run]
        return session

    return RpentApp(make, AppOptions(image_mode="halfblock", colour_depth=colour_depth, start_mode=start_mode,
                                     start_session=False,
                                     logs_dir=Path("logs")))


FRAMES = Path(__file__).with_name("frames")


def verdict_request(tmp: Path = Path("verdict_evidence")) -> OperatorRequest:
    """A verdict request whose frames come the way the real LIBERO toolkit sends them: real camera
    frames of libero_object task 0 seed 0 (captured by the toolkit, 128 px) stored as step
    artifacts by the real ``RunRecord`` and read back by ``evidence_frames`` (labels ``agentview``,
    ``wrist``), for the operator modal snapshot."""
    from rpent.robots.libero.toolkit.operator import evidence_frames
    from rpent.run.record import RunRecord

    record = RunRecord(tmp, "object_t0_s0", allow_existing=True)
    artifacts = {f"{cam}.png": (FRAMES / f"{cam}_libero_object_t0_s0.png").read_bytes() for cam in ("agentview", "wrist")}
    idx = record.add_step({"terminated": False, "truncated": False, "success": False, "env_steps": 0}, artifacts)
    return OperatorRequest(id="op-0001", kind="verdict", prompt="Is the black bowl on the plate?",
                           choices=("success", "failure", "continue", "abort"),
                           frames=evidence_frames(record, idx), created_at=0.0)
