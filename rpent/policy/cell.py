"""The shapes of a code-policy cell's result (:class:`CellResult`, :class:`RobotCall`,
:class:`CellException`), tool specs as plain dicts, and the env-step accounting of robot calls.
"""

from __future__ import annotations

from typing import Any, Mapping, TypedDict

from rpent.policy.frames import to_wire

#: Keys of a stateful tool's own result read, in this order, as the env steps it used
#: (LIBERO: ``steps_used`` for motions and ``release``, ``steps`` for ``set_gripper``).
ENV_STEP_KEYS = ("steps_used", "steps")

class CellException(TypedDict):
    """An exception that ended a cell: type name, message, formatted traceback (starts
    at the cell's own code; ``File "<cell 3>", line 2``)."""

    type: str
    message: str
    traceback: str


class RobotCall(TypedDict, total=False):
    """One ``robo.<tool>`` call of a cell, in order.

    Keys: ``index`` (1-based within the cell), ``tool``, ``args`` (as sent),
    ``ok`` (no error, not refused), ``refused`` (``budget`` | ``timeout`` | ``interrupt``
    | ``finished`` | ``operator``; absent when executed), ``result`` (the toolkit's
    result dict summarised: ``_images`` replaced by their labels in
    ``_image_labels``, strings over 2000 chars cut), ``env_steps`` (int),
    ``elapsed_s`` (float, wall seconds), ``call_id`` (passed to ``toolkit.execute``).
    """

    index: int
    tool: str
    args: dict
    ok: bool
    refused: str
    result: dict
    env_steps: int
    elapsed_s: float
    call_id: str


class CellResult(TypedDict):
    """What :meth:`CodePolicyRunner.run_cell` returns (a plain dict; JSON-able except
    ``images``).

    Keys:
        cell: index (1-based; the ``NNN`` of ``cell_NNN.py``).
        source_path, result_path: files under the output dir (relative paths).
        started_at: ISO-8601 UTC time the cell started.
        ok: the cell ran to its end without exception, timeout, interrupt or worker loss
            (an accepted finish counts as ok); ``exception`` is set whenever ok is False.
        stdout, stderr: text the cell printed (Python-level ``sys.stdout``/``stderr``).
        output_dropped_chars: characters beyond :data:`MAX_STREAM_CHARS` not kept.
        exception: :class:`CellException` or None.
        value: ``repr`` of the trailing expression's value, or None.
        robot_calls: list of :class:`RobotCall`.
        calls_made: calls counted against the budget; ``max_calls``: the budget.
        env_steps: env steps used by the cell's robot calls (see :func:`env_steps_of`).
        moved: some stateful (non-read-only) call used env steps or succeeded.
        finished: ``{status, summary}`` when ``finish`` was accepted in this cell, else None.
        timed_out: the wall-time limit ``timeout_s`` (seconds) expired.
        interrupted: :meth:`CodePolicyRunner.interrupt` was called during the cell.
        budget_exhausted: a call was refused for the budget.
        worker_restarted: the cell ran in a fresh worker because the previous one was
            lost: variables, functions and imports of earlier cells are gone.
        worker_lost: the cell ended its worker (crash, ``os._exit``, killed, or killed by
            the runner after a timeout it did not honour); ``worker_exit`` says how.
        elapsed_s: wall seconds of the cell.
        processes_ended: processes the cell started that were still running at its end and
            were killed then (signals sent; 0 without a PID namespace).
        protocol_violation: what the worker sent that the protocol does not allow, during
            this cell or after the previous cell's end (None when nothing); see the module
            docstring.
        sandbox: ``{"limits": {RLIMIT_*: value, max_processes, total_memory_bytes},
            "isolation": {layers: {name: {on, detail}}, user_namespace, network_namespace,
            capabilities_dropped, notes}}`` of the worker that ran it (see
            rpent.policy.sandbox and rpent.policy.isolation).
        images: after motion (unless ``images=False``): the toolkit's latest images,
            list of ``{"label": str, "png": bytes}``.
    """

    cell: int
    source_path: str
    result_path: str
    started_at: str
    ok: bool
    stdout: str
    stderr: str
    output_dropped_chars: int
    exception: CellException | None
    value: str | None
    robot_calls: list[RobotCall]
    calls_made: int
    max_calls: int
    timeout_s: float
    env_steps: int
    moved: bool
    finished: dict | None
    timed_out: bool
    interrupted: bool
    budget_exhausted: bool
    worker_restarted: bool
    worker_lost: bool
    worker_exit: str | None
    elapsed_s: float
    processes_ended: int
    protocol_violation: str | None
    sandbox: dict
    images: list[dict]


def spec_to_dict(spec: Any) -> dict[str, Any]:
    """A tool spec (``ToolSpec`` object or dict with ``name``, ``description``,
    ``input_schema``, ``readonly``) as a plain dict.

    Raises:
        ValueError: no usable ``name``.
    """
    get = spec.get if isinstance(spec, Mapping) else (lambda k, d=None: getattr(spec, k, d))
    name = get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool spec without a name: {spec!r:.200}")
    return {
        "name": name,
        "description": str(get("description", "") or ""),
        "input_schema": to_wire(get("input_schema", None) or {"type": "object", "properties": {}}, lenient=True),
        "readonly": bool(get("readonly", False)),
    }


def env_steps_of(result: Mapping[str, Any], readonly: bool, cumulative_before: int | None) -> tuple[int, int | None]:
    """Env steps one tool call used, and the episode's cumulative env-step count after it.

    Read-only tools use none. For a stateful tool: the first int among
    :data:`ENV_STEP_KEYS` in its result; otherwise the difference of the cumulative
    counter ``state_after.env_steps`` (the LIBERO toolkit's step view after a motion) and
    ``cumulative_before`` when both are known; otherwise 0.

    Returns:
        ``(steps_used, cumulative_after)``; ``cumulative_after`` is
        ``state_after.env_steps`` when present, else ``cumulative_before`` advanced by
        ``steps_used`` (None when unknown).
    """
    if readonly:
        return 0, cumulative_before
    after = result.get("state_after")
    cumulative = after.get("env_steps") if isinstance(after, Mapping) else None
    cumulative = int(cumulative) if isinstance(cumulative, (int, float)) and not isinstance(cumulative, bool) else None
    steps = None
    for key in ENV_STEP_KEYS:
        value = result.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            steps = int(value)
            break
    if steps is None:
        steps = max(0, cumulative - cumulative_before) if cumulative is not None and cumulative_before is not None else 0
    if cumulative is None and cumulative_before is not None:
        cumulative = cumulative_before + steps
    return steps, cumulative
