"""lerobot policy server: a lerobot checkpoint (ACT, Diffusion Policy, ...) behind rpent's VLA contract.

Usage::

    python -m rpent.robots.components.lerobot_policy_server --checkpoint train/act/checkpoints/last \\
        [--device cpu|cuda|cuda:N] [--n-exec 10] --transport socket --host 127.0.0.1 --port 8230

Methods (docs/interfaces.md, "VLA predict contract"), the same as the Pi0.5 server's:

* ``vla.predict(observation, options=None)`` (alias ``predict``) -> float32 [B, n_exec, 7] in environment
  units; ``observation = {main_images, wrist_images: uint8 [B, H, W, 3], states: float32 [B, 8],
  task_descriptions: [str] * B}``. Images of another size than the checkpoint's are resized (render at
  the policy's ``image_size`` to avoid it); a task the policy was not trained on (one-hot task input)
  is refused with the list of its tasks. ``options`` may carry ``episode_keys`` (ignored: the policy
  keeps no per-episode state).
* ``vla.metadata()`` -> {embodiment, action_dim, action_horizon, n_exec, num_flow_steps (0), num_views,
  image_size, policy, tasks, checkpoint {path, model_sha256, config_sha256}, dataset {root, sha256, ...},
  training {...}}.
* ``vla.stats()`` -> batching statistics and stage timings (see the Pi0.5 server).

Concurrent requests are batched into one model call by the same dynamic batcher as the Pi0.5 server
(``--batch-window-ms``, ``--batch-max-wait-ms``, ``--max-batch``); transports, binding and tokens are
rpent's RPC server options (:func:`rpent.rpc.cli.add_server_args`: a non-loopback ``--host`` needs a
token). The readiness line is printed once the checkpoint is loaded and one prediction has run.
"""

from __future__ import annotations

import argparse
import sys
import time

from rpent.robots.components.pi05_vla_server import Pi05VlaServer
from rpent.rpc.cli import add_server_args, serve_from_args


def _log(msg: str) -> None:
    print(f"lerobot_policy_server: {msg}", file=sys.stderr, flush=True)


class LerobotPolicyServer(Pi05VlaServer):
    """The Pi0.5 server's RPC surface and dynamic batcher around a :class:`rpent.models.lerobot.policy.LerobotPolicy`.

    Args:
        policy: the loaded policy (``prepare`` / ``run_prepared`` / ``finish`` / ``metadata``).
        batch_window_s, max_batch, batch_max_wait_s: dynamic batching (see :class:`Pi05VlaServer`).
    """

    def __init__(self, policy, batch_window_s: float = 0.008, max_batch: int = 16, batch_max_wait_s: float = 0.04):
        super().__init__(policy, batch_window_s=batch_window_s, max_batch=max_batch, batch_max_wait_s=batch_max_wait_s,
                         name="lerobot_policy_server", pipeline=False)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (RPC options from :func:`rpent.rpc.cli.add_server_args`)."""
    ap = argparse.ArgumentParser(prog="python -m rpent.robots.components.lerobot_policy_server",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True,
                    help="lerobot checkpoint: a pretrained_model directory, a checkpoints/<step> directory or an "
                         "rpent-train output directory (its checkpoints/last)")
    ap.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:N (default auto)")
    ap.add_argument("--n-exec", type=int, default=None,
                    help="actions returned per query (default: the checkpoint's, rpent_policy.json or n_action_steps)")
    ap.add_argument("--batch-window-ms", type=float, default=8.0,
                    help="dynamic batching: longest gap between arriving requests while collecting a batch (default 8 ms)")
    ap.add_argument("--batch-max-wait-ms", type=float, default=40.0, help="dynamic batching: longest collection (default 40 ms)")
    ap.add_argument("--max-batch", type=int, default=16, help="largest batch per model call (default 16)")
    add_server_args(ap)
    return ap


def load_policy(args: argparse.Namespace):
    """The :class:`~rpent.models.lerobot.policy.LerobotPolicy` of ``--checkpoint`` (imports torch and lerobot).

    Raises:
        SystemExit(2): the checkpoint cannot be loaded, or lerobot is missing (message names the fix).
    """
    import torch

    from rpent.models.lerobot.layout import CheckpointLayoutError

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device.startswith("cuda") and not torch.cuda.is_available():
        _log(f"--device {device} but this torch ({torch.__version__}) sees no CUDA device; use --device cpu")
        raise SystemExit(2)
    try:
        from rpent.models.lerobot.policy import LerobotPolicy

        return LerobotPolicy(args.checkpoint, device=device, n_exec=args.n_exec, log=_log)
    except ImportError as e:
        _log(f"lerobot is not importable ({e}); install the train extra: pip install -e '.[flywheel,train]' "
             "and pip install --no-deps lerobot==0.4.4")
        raise SystemExit(2) from None
    except (CheckpointLayoutError, ValueError, OSError) as e:
        _log(f"cannot load the checkpoint: {e}")
        raise SystemExit(2) from None


def warmup(policy) -> float:
    """One prediction on a blank observation (first-call allocations happen before serving); returns seconds."""
    import numpy as np

    s = policy.image_size
    t0 = time.perf_counter()
    obs = {"main_images": np.zeros((1, s, s, 3), np.uint8), "wrist_images": np.zeros((1, s, s, 3), np.uint8),
           "states": np.zeros((1, 8), np.float32),
           "task_descriptions": [policy.tasks[0] if policy.tasks else "warm up"]}
    policy.predict(obs)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    """Entry point: load, warm up, print the readiness line, serve until shutdown."""
    args = build_parser().parse_args(argv)
    if args.max_batch < 1 or args.batch_window_ms < 0 or args.batch_max_wait_ms < 0:
        _log("--max-batch must be >= 1 and the batching times >= 0")
        raise SystemExit(2)
    t0 = time.perf_counter()
    policy = load_policy(args)
    _log(f"warm-up prediction {warmup(policy):.2f} s")
    meta = policy.metadata()
    _log(f"ready in {time.perf_counter() - t0:.1f} s: policy {meta['policy']}, image {meta['image_size']} px, "
         f"n_exec {meta['n_exec']}, {len(meta['tasks'])} tasks, model sha256 {meta['checkpoint']['model_sha256'][:12]}")
    server = LerobotPolicyServer(policy, batch_window_s=args.batch_window_ms / 1000.0, max_batch=args.max_batch,
                                 batch_max_wait_s=args.batch_max_wait_ms / 1000.0)
    try:
        serve_from_args(server, args)
    finally:
        server.close()


if __name__ == "__main__":
    main()
