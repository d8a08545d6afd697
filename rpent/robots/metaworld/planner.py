"""The offline ``expert`` planner: Meta-World's scripted expert through the toolkit (no LLM, no GPU).

It drives the toolkit only through ``toolkit.execute`` (the interface LLM planners use), so its run
record looks like any other: ``view_env_state``, then ``expert_policy`` (Meta-World's own
``metaworld.policies`` controller for the task, run closed loop in the env server, every action
recorded), then ``finish`` with the status the environment's predicate supports. A toolkit without
an ``expert_policy`` tool (LIBERO) ends with ``finish(status="unsupported")``.
"""

from __future__ import annotations

import time
import uuid

from rpent.planners.base import PlannerConfig, PlannerResult, PlannerStats

__all__ = ["ExpertPlanner"]


class _Stop(Exception):
    """The run must end now (interrupt, timeout)."""


class ExpertPlanner:
    """Offline planner (see module docstring).

    Args:
        config: ``timeout_s`` applies; ``max_turns`` caps the tool calls (at least 4 are needed).
    """

    name = "expert"

    def __init__(self, config: PlannerConfig | None = None) -> None:
        self.config = config or PlannerConfig()

    def solve(self, system_prompt: str, user_message: str, toolkit, *, steering=None, on_event=None) -> PlannerResult:
        """Run the expert and finish; never raises (see :class:`PlannerResult`)."""
        from rpent.planners.scripted import ScriptedPlanner

        t0 = time.monotonic()
        stats = PlannerStats()
        messages: list[dict] = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]},
                                {"role": "user", "content": [{"type": "text", "text": user_message}], "source": "task"}]
        result = PlannerResult(messages=messages, stats=stats)

        def emit(kind: str, payload: dict) -> None:
            if on_event is not None:
                try:
                    on_event(kind, payload)
                except Exception:  # noqa: BLE001
                    pass

        def say(text: str) -> None:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
            emit("text", {"text": text})

        def call(name: str, args: dict) -> dict:
            for line in steering.drain() if steering is not None else []:
                messages.append({"role": "user", "content": [{"type": "text", "text": line}], "source": "operator"})
                say(f"The expert planner cannot use operator text; ignored: {line!r}")
            if steering is not None and steering.stop_requested:
                raise _Stop(steering.stop_reason or "interrupted by operator")
            if self.config.timeout_s is not None and time.monotonic() - t0 > self.config.timeout_s:
                raise _Stop(f"expert planner timed out after {self.config.timeout_s:g}s")
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name,
                                                                 "input": args}]})
            emit("tool_call", {"name": name, "args": args, "call_id": call_id})
            stats.tool_calls += 1
            stats.turns_used += 1
            t = time.monotonic()
            res = toolkit.execute(name, args, call_id)
            clean = {k: v for k, v in res.items() if k != "_images"}
            messages.append({"role": "tool", "name": name, "tool_call_id": call_id, "content": clean,
                             "is_error": "error" in res, "images": len(res.get("_images") or [])})
            emit("tool_result", {"call_id": call_id, "name": name, "result": clean, "is_error": "error" in res,
                                 "elapsed_s": round(time.monotonic() - t, 3)})
            if res.get("code") == "tool_cancelled":
                raise _Stop((steering.stop_reason if steering is not None else None) or "interrupted by operator")
            return res

        remove = steering.add_interrupt_listener(toolkit.cancel) if steering is not None else (lambda: None)
        try:
            names = {s.name for s in toolkit.specs()}
            if "expert_policy" not in names:
                say("This robot's toolkit has no expert_policy tool; the expert planner cannot act.")
                ScriptedPlanner._finish(call, result, "unsupported", "no expert_policy tool for this robot")
                return self._done(result, t0)
            view = call("view_env_state", {})
            say(f"Running the Meta-World expert policy for: {view.get('task_language')!r}.")
            out = call("expert_policy", {})
            if "error" in out:
                say(f"expert_policy failed: {out['error']}")
            if toolkit.solved():
                say(f"The environment reports success after {out.get('env_steps')} env steps.")
                status, summary = "success", f"the expert policy solved the task in {out.get('env_steps')} env steps"
            else:
                status = "failure"
                summary = out.get("error") or f"no success after {out.get('steps_used')} expert steps"
            ScriptedPlanner._finish(call, result, status, summary)
        except _Stop as stop:
            result.error = str(stop)
            result.stop_reason = "timeout" if "timed out" in str(stop) else "interrupted"
            result.error_kind = "timeout" if result.stop_reason == "timeout" else "interrupted"
        except Exception as exc:  # noqa: BLE001 — planners report, never raise
            result.error = f"expert planner failed: {type(exc).__name__}: {exc}"
            result.stop_reason = "error"
            result.error_kind = "internal"
        finally:
            remove()
        return self._done(result, t0)

    @staticmethod
    def _done(result: PlannerResult, t0: float) -> PlannerResult:
        result.stats.elapsed_s = round(time.monotonic() - t0, 3)
        return result
