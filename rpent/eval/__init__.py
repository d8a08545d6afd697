"""Batch VLA evaluation on LIBERO (``rpent-eval``): closed-loop rollouts of a policy, no planner.

Protocol (the product document's evaluation guide, RLinf v0.4 with ApxInf, minus its pitfalls):
``total_num_envs`` LIBERO envs run in ``env.num_workers`` spawned worker processes; every rollout
epoch resets every env to its (task, reset state) from an interleaved, round-robin plan
(:mod:`rpent.eval.plan`), then each env queries the policy every ``num_action_chunks`` env steps
(batched per worker) until ``max_episode_steps``. Metrics ``eval/success_once``,
``eval/success_at_end``, ``eval/return``, ``eval/reward``, ``eval/episode_len`` and
``eval/num_trajectories`` (= envs x epochs, checked) go to ``metrics.log``, TensorBoard (step 0)
and the per-task table.

Modules (one concept each; data flows config -> settings -> plan -> rollout -> metrics -> outputs):

* :mod:`~rpent.eval.config` - YAML configs (shipped names in ``configs/``), Hydra-style overrides;
* :mod:`~rpent.eval.validation` / :mod:`~rpent.eval.settings` - the seed's constraints -> typed settings;
* :mod:`~rpent.eval.plan` - which (task, reset state) every env runs in every epoch;
* :mod:`~rpent.eval.policies` - in-process Pi0.5, ApxInf, or any ``vla.predict`` endpoint;
* :mod:`~rpent.eval.rollout` (driver) / :mod:`~rpent.eval.worker` (env process) /
  :mod:`~rpent.eval.wire` (their messages) / :mod:`~rpent.eval.sim_adapter` (LiberoSim per slot);
* :mod:`~rpent.eval.metrics`, :mod:`~rpent.eval.outputs`, :mod:`~rpent.eval.progress`;
* :mod:`~rpent.eval.runner` - one run end to end (what ``rpent-eval`` calls).

Python API::

    from rpent.eval.config import load_eval_config
    from rpent.eval.validation import build_settings
    from rpent.eval.runner import run_eval
    loaded = load_eval_config("libero_10_pi05_eval", ["policy.endpoint=http://127.0.0.1:8000"])
    outcome = run_eval(build_settings(loaded), loaded, logs_dir="logs")

Env workers are started with multiprocessing *spawn*: a script that calls :func:`run_eval` must
guard its entry point with ``if __name__ == "__main__":``.
"""
