"""``rpent-train``: train a lerobot policy (ACT, Diffusion Policy) from scratch on an rpent-flywheel dataset.

Examples::

    # GPU (resumable: the same command with --resume continues from checkpoints/last)
    rpent-train --dataset datasets/object/train --val-dataset datasets/object/val \\
        --output-dir train/act-object --recipe act --steps 20000 --batch-size 128 --device cuda
    # CPU: a smaller network
    rpent-train --dataset datasets/object/train --output-dir train/act-cpu --recipe act-small \\
        --steps 2000 --batch-size 16 --device cpu
    # a float16 copy of a checkpoint's weights (half the bytes, for moving it)
    rpent-train compact train/act-object/checkpoints/last/pretrained_model act-object-fp16
    # redraw OUT/loss.png from OUT/metrics.jsonl
    rpent-train plot train/act-object

Writes ``OUT/checkpoints/<step>/pretrained_model/`` (a lerobot checkpoint plus ``rpent_policy.json``;
serve it with ``python -m rpent.robots.components.lerobot_policy_server --checkpoint DIR``),
``OUT/metrics.jsonl`` and ``OUT/loss.png`` (see :mod:`rpent.training.trainer`).

Exit codes: 0 trained to --steps, 3 stopped by --time-budget-s (resume to continue), 2 bad input,
1 training failed, 130 interrupted (the last complete checkpoint stays).
"""

from __future__ import annotations

import argparse
import sys

from rpent.training.recipe import RECIPES


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-train`` parser."""
    p = argparse.ArgumentParser(prog="rpent-train", description=__doc__.split("\n")[0].replace("``", ""),
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Also: 'rpent-train compact SRC DEST' (a 16-bit copy of a checkpoint) and\n"
                                       "'rpent-train plot OUT' (redraw OUT/loss.png); see their --help.\n"
                                       "Exit codes: 0 done, 3 time budget reached (resume), 2 bad input, 1 failed, "
                                       "130 interrupted.")
    p.add_argument("--dataset", required=True, help="LeRobot dataset from rpent-flywheel export (its train/ directory)")
    p.add_argument("--val-dataset", default=None, help="validation split (the export's val/) for a validation loss")
    p.add_argument("--output-dir", required=True, help="training output directory (new, or existing with --resume)")
    p.add_argument("--recipe", choices=RECIPES, default="act",
                   help="act (GPU, ~19 M parameters), act-small (CPU), diffusion (default act)")
    p.add_argument("--steps", type=int, default=20000, help="total optimizer steps over all slices (default 20000)")
    p.add_argument("--batch-size", type=int, default=64, help="frames per step (default 64)")
    p.add_argument("--save-every", type=int, default=2000, help="checkpoint every N steps (default 2000)")
    p.add_argument("--log-every", type=int, default=50, help="metrics line every N steps (default 50)")
    p.add_argument("--seed", type=int, default=0, help="weights init and batch sampling seed (default 0)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:N")
    p.add_argument("--resume", action="store_true", help="continue OUT/checkpoints/last (same dataset and recipe)")
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="stop with a checkpoint after this many seconds of training in this slice (exit 3)")
    p.add_argument("--fit-steps-to-budget", action="store_true",
                   help="with --time-budget-s: after 200 timed steps, set --steps to what fits the budget (the "
                        "learning-rate schedule then ends with it)")
    p.add_argument("--shift-px", type=int, default=4, help="random-shift image augmentation in pixels (0: none; default 4)")
    p.add_argument("--n-exec", type=int, default=None, help="actions executed per query when served (default: the recipe's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def build_compact_parser() -> argparse.ArgumentParser:
    """The ``rpent-train compact`` parser."""
    p = argparse.ArgumentParser(prog="rpent-train compact",
                                description="Copy a pretrained_model directory with 16-bit weights (half the bytes; "
                                            "it loads into the float32 model as is).",
                                epilog="Exit codes: 0 written (its path is printed), 2 bad input.")
    p.add_argument("src", metavar="SRC",
                   help="a lerobot checkpoint: rpent-train's output directory (its checkpoints/last), a "
                        "checkpoints/<step> directory or a pretrained_model directory")
    p.add_argument("dest", metavar="DEST", help="new directory for the copy (must not exist)")
    p.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16",
                   help="dtype of the copy's floating-point weights (default float16)")
    return p


def build_plot_parser() -> argparse.ArgumentParser:
    """The ``rpent-train plot`` parser."""
    p = argparse.ArgumentParser(prog="rpent-train plot", description="Draw OUT/loss.png from OUT/metrics.jsonl.",
                                epilog="Exit codes: 0 drawn (its path is printed), 2 no metrics.jsonl or no matplotlib.")
    p.add_argument("output_dir", metavar="OUT", help="an rpent-train output directory (holding metrics.jsonl)")
    return p


def compact_main(argv: list[str]) -> int:
    """``rpent-train compact SRC DEST [--dtype float16|bfloat16]``."""
    a = build_compact_parser().parse_args(argv)
    from rpent.models.lerobot.layout import CheckpointLayoutError, find_pretrained_dir
    from rpent.training.trainer import export_compact

    try:
        out = export_compact(find_pretrained_dir(a.src), a.dest, a.dtype)
    except (CheckpointLayoutError, FileExistsError) as e:
        print(f"rpent-train compact: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


def plot_main(argv: list[str]) -> int:
    """``rpent-train plot OUT``: (re)draw ``OUT/loss.png`` from ``OUT/metrics.jsonl``."""
    a = build_plot_parser().parse_args(argv)
    import json
    from pathlib import Path

    from rpent.training.trainer import plot_losses

    f = Path(a.output_dir) / "metrics.jsonl"
    if not f.is_file():
        print(f"rpent-train plot: {f} does not exist", file=sys.stderr)
        return 2
    metrics = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
    if not plot_losses(metrics, Path(a.output_dir) / "loss.png"):
        print("rpent-train plot: matplotlib is not installed (pip install -e '.[train]')", file=sys.stderr)
        return 2
    print(Path(a.output_dir) / "loss.png")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compact"]:
        raise SystemExit(compact_main(argv[1:]))
    if argv[:1] == ["plot"]:
        raise SystemExit(plot_main(argv[1:]))
    args = build_parser().parse_args(argv)
    from rpent.models.lerobot.layout import CheckpointLayoutError
    from rpent.training.data import DatasetError
    from rpent.training.trainer import TrainArgs, Trainer, TrainingError

    targs = TrainArgs(dataset=args.dataset, output_dir=args.output_dir, val_dataset=args.val_dataset, recipe=args.recipe,
                      steps=args.steps, batch_size=args.batch_size, save_every=args.save_every, log_every=args.log_every,
                      seed=args.seed, device=args.device, resume=args.resume, time_budget_s=args.time_budget_s,
                      fit_steps_to_budget=args.fit_steps_to_budget,
                      shift_px=args.shift_px, n_exec=args.n_exec, progress=not args.no_progress)
    try:
        trainer = Trainer(targs, log=lambda m: print(f"rpent-train: {m}", file=sys.stderr, flush=True))
    except (TrainingError, DatasetError, CheckpointLayoutError, ValueError) as e:
        print(f"rpent-train: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        result = trainer.run()
    except KeyboardInterrupt:
        print("rpent-train: interrupted; the last complete checkpoint is OUT/checkpoints/last (resume with --resume)",
              file=sys.stderr)
        raise SystemExit(130) from None
    except TrainingError as e:
        print(f"rpent-train: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"rpent-train: step {result['step']}, {result['wall_s']} s, checkpoint {result['checkpoint']} ({result['stopped']})",
          file=sys.stderr)
    raise SystemExit(3 if result["stopped"] == "time_budget" else 0)


if __name__ == "__main__":
    main()
