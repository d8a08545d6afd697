"""Skills of the offline ``scripted`` planner for LIBERO (pure logic; imports no simulator).

* :mod:`~rpent.robots.libero.skills.language` — instruction -> :class:`TaskPlan` of steps.
* :mod:`~rpent.robots.libero.skills.naming` — prompt/object-name matching, masks.
* :mod:`~rpent.robots.libero.skills.estimate` — :class:`ObjectEstimate` from back-projected points.
* :mod:`~rpent.robots.libero.skills.spatial` — which instance a spatial qualifier means.
* :mod:`~rpent.robots.libero.skills.grasp` — grasp choice from the object's shape (rim grasps).
* :mod:`~rpent.robots.libero.skills.motion` — executor protocol and the pick-and-place motion plan.

:mod:`rpent.robots.libero.strategy` re-exports the older names.
"""
