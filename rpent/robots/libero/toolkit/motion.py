"""Scripted motion tools: ``move_to``, ``move_pose``, ``rotate_wrist``, ``rotate_pitch``,
``set_gripper``, ``release``.

Thin wrappers over the "state -> action -> step" loops of :mod:`rpent.robots.libero.control`
(action convention, defaults and result fields: RPent reference §3.2-§3.3). Every env step goes
through :meth:`LiberoToolkit.env_step` (cancel check, video frame, trajectory record).
All positions are metres in the LIBERO world frame; angles are radians.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rpent.robots.libero import control
from rpent.toolkit.registry import tool

__all__ = ["MotionTools"]

XYZ = Annotated[list[float], Field(min_length=3, max_length=3,
                                   description="target end-effector position [x, y, z] in metres, world frame")]
Gripper = Annotated[float, Field(ge=-1.0, le=1.0, description="gripper command: -1 open, +1 close")]


class MotionTools:
    """Mixin of :class:`rpent.robots.libero.toolkit.LiberoToolkit` with the motion tools."""

    def _motion(self, fn, **kwargs) -> dict:
        try:
            return fn(self.env_step, self.current_state(), cancelled=self.cancelled, **kwargs)
        except control.MotionArgumentError as exc:
            raise ValueError(str(exc)) from None

    @tool()
    def move_to(self, xyz: XYZ, gripper: Gripper = -1.0,
                tol: Annotated[float, Field(gt=0, description="stop within this distance (m)")] = 0.012,
                step_clip: Annotated[float, Field(gt=0, description="max translation per env step (m)")] = 0.025,
                max_steps: Annotated[int, Field(ge=1, le=2000, description="env step budget")] = 80,
                action_scale: Annotated[float, Field(gt=0)] = 0.05,
                target_yaw: Annotated[float | None, Field(description="also turn the gripper to this yaw (rad)")] = None,
                yaw_step_clip: Annotated[float, Field(gt=0)] = 0.10) -> dict:
        """Move the end effector to xyz (m, world frame) holding its orientation.

        Never move more than 0.30 m in x/y in one call (the OSC IK flips): use 2-3 waypoints.
        Returns target_xyz, final_eef_pos, final_dist_m, steps_used, reached, terminated,
        truncated, then the new state and camera images."""
        return self._motion(control.move_to, xyz=xyz, gripper=gripper, tol=tol, step_clip=step_clip,
                            max_steps=max_steps, action_scale=action_scale, target_yaw=target_yaw,
                            yaw_step_clip=yaw_step_clip)

    @tool()
    def move_pose(self, xyz: XYZ,
                  target_pitch: Annotated[float | None, Field(description="pitch about world x (rad); 0 = gripper down")] = None,
                  target_yaw: Annotated[float | None, Field(description="yaw about world z (rad)")] = None,
                  gripper: Gripper = -1.0, step_clip: Annotated[float, Field(gt=0)] = 0.02,
                  pitch_step: Annotated[float, Field(gt=0)] = 0.08, yaw_step: Annotated[float, Field(gt=0)] = 0.08,
                  tol: Annotated[float, Field(gt=0)] = 0.012, ori_tol: Annotated[float, Field(gt=0)] = 0.05,
                  action_scale: Annotated[float, Field(gt=0)] = 0.05,
                  max_steps: Annotated[int, Field(ge=1, le=2000)] = 150) -> dict:
        """Servo position (m, world) and orientation (pitch, yaw in rad) together, e.g. for
        cabinet and low-shelf poses. Returns final_eef_pos, final_dist_m, final_pitch, steps_used,
        terminated, truncated, then the new state and images."""
        return self._motion(control.move_pose, xyz=xyz, target_pitch=target_pitch, target_yaw=target_yaw,
                            gripper=gripper, step_clip=step_clip, pitch_step=pitch_step, yaw_step=yaw_step,
                            tol=tol, ori_tol=ori_tol, action_scale=action_scale, max_steps=max_steps)

    @tool()
    def rotate_wrist(self, target_yaw: Annotated[float | None, Field(description="absolute yaw (rad)")] = None,
                     delta_yaw: Annotated[float | None, Field(description="relative yaw (rad)")] = None,
                     gripper: Gripper = 1.0, max_steps: Annotated[int, Field(ge=1, le=500)] = 40,
                     tol: Annotated[float, Field(gt=0)] = 0.02, step_clip: Annotated[float, Field(gt=0)] = 0.10) -> dict:
        """Turn the gripper about world z to target_yaw or by delta_yaw (rad), holding xyz.
        Returns start_yaw, target_yaw, final_yaw, final_err, steps_used."""
        return self._motion(control.rotate_wrist, target_yaw=target_yaw, delta_yaw=delta_yaw, gripper=gripper,
                            max_steps=max_steps, tol=tol, step_clip=step_clip)

    @tool()
    def rotate_pitch(self, target_pitch: Annotated[float | None, Field(description="absolute pitch (rad)")] = None,
                     delta_pitch: Annotated[float | None, Field(description="relative pitch (rad)")] = None,
                     gripper: Gripper = 1.0, max_steps: Annotated[int, Field(ge=1, le=500)] = 40,
                     tol: Annotated[float, Field(gt=0)] = 0.02, step_clip: Annotated[float, Field(gt=0)] = 0.10) -> dict:
        """Tilt the gripper about world x to target_pitch or by delta_pitch (rad), holding xyz.
        Returns start_pitch, target_pitch, final_pitch, final_err, steps_used."""
        return self._motion(control.rotate_pitch, target_pitch=target_pitch, delta_pitch=delta_pitch,
                            gripper=gripper, max_steps=max_steps, tol=tol, step_clip=step_clip)

    @tool()
    def set_gripper(self, gripper: Gripper = -1.0,
                    steps: Annotated[int, Field(ge=1, le=200, description="env steps to drive the gripper")] = 5) -> dict:
        """Hold the pose and drive the gripper (-1 open, +1 close) for `steps` env steps.
        Returns gripper, steps, gripper_opening (m), terminated, truncated."""
        return self._motion(control.set_gripper, gripper=gripper, steps=steps)

    @tool()
    def release(self, max_steps: Annotated[int, Field(ge=1, le=200)] = 20) -> dict:
        """Open the gripper in place (this can trigger LIBERO's On/In success predicate).
        Returns steps_used and start/peak/final gripper opening (m)."""
        return self._motion(control.release, max_steps=max_steps)
