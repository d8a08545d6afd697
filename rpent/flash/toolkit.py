"""The flash toolkit: the LIBERO toolkit with images rendered only where a replay looks.

A flash replay needs camera images only where it re-localises an anchor (``segment`` on one
camera at a few steps). :class:`FlashToolkit` is :class:`~rpent.robots.libero.toolkit.LiberoToolkit`
in its ``capture="on_demand"`` mode: every motion step is recorded as usual (state, command,
result, elapsed time, env steps) but with **no images** (``"capture": "state_only"`` in
``states.json``), and a camera of the **latest** step is rendered when a read-only tool asks for
it (``segment``, ``back_project``, ``view_env_state``, ``view_camera_meta``): the artifacts are
then added to that step (``"capture": "on_demand"`` with the cameras rendered). ``finish``
renders both cameras of the final step first, so every run record ends with the final scene. An
earlier state-only step has no images and cannot get them any more (the simulator renders only
the present): a tool asking for one gets a one-line error naming the step.

Used for ``--planner flash`` (:func:`rpent.run.runner.run_task` picks the on-demand mode for it).
The mechanism lives in :mod:`rpent.robots.libero.toolkit` (the scripted planner uses it too).
"""

from __future__ import annotations

from rpent.robots.libero.toolkit import IMAGE_TOOLS, LiberoToolkit

__all__ = ["FlashToolkit", "IMAGE_TOOLS"]


class FlashToolkit(LiberoToolkit):
    """:class:`LiberoToolkit` whose motion steps are state-only; images on demand (module doc).

    Same arguments as :class:`LiberoToolkit`; ``capture`` defaults to ``"on_demand"``.
    """

    def __init__(self, *args, capture: str = "on_demand", **kwargs) -> None:
        super().__init__(*args, capture=capture, **kwargs)
