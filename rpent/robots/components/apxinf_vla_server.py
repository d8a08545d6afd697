"""APXInf VLA server: the VLA predict contract served through APXinf-robo's L1 bare-model API.

Usage (seed 000, "APXInf VLA 服务（可选）")::

    python -m rpent.robots.components.apxinf_vla_server --embodiment libero \\
        --model-path /path/to/pi05-libero --tokenizer-path /path/to/tokenizer.model \\
        --norm-stats-path /path/to/norm_stats.json --precision bf16 \\
        --transport http --host 127.0.0.1 --port 8220
    rpent ... --vla-endpoint http://127.0.0.1:8220

Methods are those of :mod:`rpent.robots.components.pi05_vla_server` (``vla.predict`` / ``predict``,
``vla.metadata``, ``vla.stats``), with the same options (``noise_source``, ``seed``, ``num_flow_steps``)
and the same errors for bad requests. Inference runs in ApxInf (:mod:`rpent.models.pi05.apxinf`); request
validation, tokenisation, resize and un-normalisation are ours. The L1 handle is thread-bound, so it is
loaded on the batch worker thread that later runs every ``infer_rgb``; concurrent clients are queued
onto that thread (one row per ``infer_rgb``).

Start-up failures exit with status 2 before binding, with the reason and the fix on stderr:
``apxinf_robo`` missing (with the install instruction), a mode other than ``eval``, embodiment
``franka`` or unknown, missing weights/tokenizer/norm stats, and a model that does not match the preset
("active camera views ... but the ApxInf checkpoint expects ...").

Test hook: ``--backend-module NAME`` imports ``NAME`` instead of ``apxinf_robo``; any module offering
``load_bare_model`` with the L1 signature works (the tests use ``tests/components/apxinf_standin.py``).
"""

from __future__ import annotations

import argparse
import sys
import time

from rpent.models.pi05.apxinf import (
    APXINF_BACKEND_MODULE,
    APXINF_EMBODIMENTS,
    APXINF_MODES,
    APXINF_PRECISIONS,
    ApxInfPolicy,
    ApxInfUnavailable,
    check_embodiment,
    import_backend,
)
from rpent.rpc.cli import add_server_args, serve_from_args


def _log(msg: str) -> None:
    print(f"apxinf_vla_server: {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (RPC options come from :func:`rpent.rpc.cli.add_server_args`)."""
    ap = argparse.ArgumentParser(prog="python -m rpent.robots.components.apxinf_vla_server", description=__doc__.split("\n")[0])
    ap.add_argument("--embodiment", default="libero", help=f"robot preset: {', '.join(APXINF_EMBODIMENTS)} (default libero)")
    ap.add_argument("--model-path", required=True, help="APXInf-compatible Pi0.5 weights directory (config.json, model.safetensors)")
    ap.add_argument("--tokenizer-path", default=None, help="PaliGemma SentencePiece model (default: found in --model-path)")
    ap.add_argument("--norm-stats-path", default=None, help="openpi norm_stats.json (default: --model-path/norm_stats.json)")
    ap.add_argument("--precision", default="bf16", help=f"ApxInf precision: {', '.join(APXINF_PRECISIONS)} (default bf16)")
    ap.add_argument("--cuda-device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--mode", default="eval", help="only 'eval' (inference) is supported")
    ap.add_argument("--num-flow-steps", type=int, default=None, help="Euler steps (default: preset, 5)")
    ap.add_argument("--action-horizon", type=int, default=None, help="predicted actions per chunk (default: preset)")
    ap.add_argument("--n-exec", type=int, default=None, help="actions returned per query (default: preset)")
    ap.add_argument("--state-in-prompt", choices=("auto", "yes", "no"), default="auto",
                    help="discrete state in the prompt (auto: checkpoint config, else preset)")
    ap.add_argument("--batch-window-ms", type=float, default=2.0,
                    help="gathering window for concurrent requests (default 2 ms; rows still run one infer_rgb each)")
    ap.add_argument("--backend-module", default=APXINF_BACKEND_MODULE,
                    help=f"module providing load_bare_model (default {APXINF_BACKEND_MODULE}; tests pass a stand-in)")
    add_server_args(ap)
    return ap


def build_policy(args: argparse.Namespace) -> ApxInfPolicy:
    """Check the arguments, import the backend and read tokenizer/norm stats (no model load yet).

    Raises:
        SystemExit(2): with the reason and the fix on stderr.
    """
    if args.mode not in APXINF_MODES:
        _log(f"--mode {args.mode!r} is not supported: the APXInf adapter serves eval (inference) only; "
             "train with the openpi/RLinf stack")
        raise SystemExit(2)
    try:
        check_embodiment(args.embodiment)
        backend = import_backend(args.backend_module)
        return ApxInfPolicy.create(
            backend, args.model_path, args.embodiment, args.tokenizer_path, args.norm_stats_path,
            device=f"cuda:{args.cuda_device}", precision=args.precision, action_horizon=args.action_horizon,
            n_exec=args.n_exec, num_flow_steps=args.num_flow_steps, state_in_prompt=args.state_in_prompt)
    except (ApxInfUnavailable, ValueError, OSError) as exc:
        _log(str(exc))
        raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> None:
    """Entry point: check, load the model on the worker thread, print the readiness line, serve."""
    from rpent.robots.components.pi05_vla_server import Pi05VlaServer

    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    policy = build_policy(args)
    try:
        server = Pi05VlaServer(policy, batch_window_s=args.batch_window_ms / 1000.0, max_batch=16, batch_max_wait_s=0.01,
                               initializer=policy.load, name="apxinf_vla_server")
    except Exception as exc:  # noqa: BLE001 - any load failure ends the start-up with its message
        _log(f"cannot load the APXInf model from {args.model_path}: {type(exc).__name__}: {exc}")
        raise SystemExit(2) from None
    _log(f"ready in {time.perf_counter() - t0:.1f} s: {policy.metadata()}")
    try:
        serve_from_args(server, args)
    finally:
        server.close()


if __name__ == "__main__":
    main()
