"""Meta-World robot package (Rethink Sawyer, metaworld 3.1.1 + MuJoCo 3.3.0 in its own environment).

Modules (one concept each; importing this package imports no simulator):

* :mod:`~rpent.robots.metaworld.tasks`: MT10 / MT50 task names, indices and instructions (pure data).
* :mod:`~rpent.robots.metaworld.sim`: the env core (imports metaworld; env-server side only).
* :mod:`~rpent.robots.metaworld.env_server`: the RPC server, run by ``.venv-metaworld/bin/python``.
* :mod:`~rpent.robots.metaworld.env_client`, :mod:`~rpent.robots.metaworld.toolkit`,
  :mod:`~rpent.robots.metaworld.prompts`, :mod:`~rpent.robots.metaworld.planner`: the agent side.
* :mod:`~rpent.robots.metaworld.robot`: the adapter of :mod:`rpent.robots.registry`.
"""
