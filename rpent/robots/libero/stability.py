"""Whether a MuJoCo simulation blew up: its bad-position/velocity/acceleration warnings.

MuJoCo raises ``mjWARN_BADQPOS``, ``mjWARN_BADQVEL`` or ``mjWARN_BADQACC`` (``mujoco.mjtWarning``
4, 5, 6) when a joint's position, velocity or acceleration is NaN, inf or huge, and then resets
the whole state to the model's defaults (every free object jumps to the world origin), so nothing
after it is the episode the init state described. Some LIBERO-PRO init states do this with no
action at all (libero_10_task task 5, init state 0: the book and the mug start in contact).
"""

from __future__ import annotations

from typing import Any

__all__ = ["UNSTABLE_WARNINGS", "warning_counts", "first_instability"]

#: ``mujoco.mjtWarning`` index -> name of the warnings that mean the simulation blew up.
UNSTABLE_WARNINGS = {4: "bad qpos", 5: "bad qvel", 6: "bad qacc"}


def warning_counts(data: Any) -> dict[int, int]:
    """How often each of :data:`UNSTABLE_WARNINGS` was raised so far (``MjData.warning[i].number``)."""
    return {i: int(data.warning[i].number) for i in UNSTABLE_WARNINGS}


def first_instability(data: Any, model: Any, baseline: dict[int, int], env_step: int) -> dict | None:
    """The first of :data:`UNSTABLE_WARNINGS` raised since ``baseline`` (:func:`warning_counts`
    taken at the episode's start), or None.

    Args:
        data, model: robosuite's ``MjData`` / ``MjModel`` wrappers (``joint_id2name``,
            ``body_id2name``). env_step: the episode's env steps so far (0: while the init
            state settled, before any action).
    Returns:
        ``{"env_step", "warning": "bad qacc" | "bad qvel" | "bad qpos", "dof": int (the DOF
        index MuJoCo named), "joint": str | None, "body": str | None (the joint's body),
        "detail": one line}``, or None.
    """
    for i, name in UNSTABLE_WARNINGS.items():
        if int(data.warning[i].number) <= baseline.get(i, 0):
            continue
        dof = int(data.warning[i].lastinfo)
        joint = body = None
        if 0 <= dof < model.nv:
            jid = int(model.dof_jntid[dof])
            joint = model.joint_id2name(jid)
            body = model.body_id2name(int(model.jnt_bodyid[jid]))
        where = "while the init state settled, before any action" if env_step == 0 else f"at env step {env_step}"
        return {"env_step": env_step, "warning": name, "dof": dof, "joint": joint, "body": body,
                "detail": (f"the simulation became unstable {where}: MuJoCo found a NaN, inf or huge "
                           f"{name.split()[1]} at DOF {dof} (joint {joint or '?'} of {body or '?'}) and reset "
                           f"the state; the scene after it is not the init state's")}
    return None
