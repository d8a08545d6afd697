"""Training a lerobot policy from scratch on an rpent-flywheel dataset, resumable in slices.

The loop uses lerobot's own pieces: the policy class (``ACTPolicy`` / ``DiffusionPolicy``, random
init), its optimizer parameter groups (``get_optim_params``) in lerobot's ``AdamWConfig``, lerobot's
``CosineDecayWithWarmupSchedulerConfig`` schedule, and the policy's pre/post-processor pipelines
(``make_pre_post_processors`` with the dataset's statistics), which normalise every batch exactly
as they will at serving time. Batches come from :func:`rpent.training.data.sample_batch` (all
frames in device memory). On CUDA the forward pass runs under bf16 autocast.

Output directory::

    OUT/train_config.json                  the recipe, arguments, dataset provenance (fixed at the start)
    OUT/metrics.jsonl                      one line per logged step: loss, l1, kld, lr, steps/s (+ val)
    OUT/loss.png                           training (and validation) loss against steps
    OUT/checkpoints/<step:06d>/pretrained_model/   config.json, model.safetensors, processors,
                                                   rpent_policy.json, loss.png
    OUT/checkpoints/<step:06d>/training_state/     optimizer, scheduler, step, RNG (safetensors + json)
    OUT/checkpoints/last -> <step:06d>

Each checkpoint is written under a temporary name and renamed when complete, and ``last`` is
switched only then: a killed run resumes (``resume=True``) from the last complete checkpoint with
the same optimizer state, learning-rate schedule position, step count and sampling generator, so a
run of N steps can be cut into slices of a few minutes (``time_budget_s``) on a GPU lent for a limited time.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from rpent.training.recipe import build_config, get_recipe


PROBE_STEPS = 200
"""Steps timed before ``fit_steps_to_budget`` sets the run's total."""


class TrainingError(RuntimeError):
    """Training cannot start or continue (message names the cause and the fix)."""


@dataclass
class TrainArgs:
    """What one training run needs.

    Attributes:
        dataset: LeRobot dataset directory from ``rpent-flywheel export`` (its ``train/``).
        output_dir: training output directory (new, or an existing one with ``resume``).
        val_dataset: optional validation split (``val/``) for a validation loss at each checkpoint.
        recipe: :data:`rpent.training.recipe.RECIPES`.
        steps: total optimizer steps of the run (over all slices).
        batch_size: frames per step.
        save_every: checkpoint every this many steps (and at the end of a slice).
        log_every: metrics line every this many steps.
        seed: seeds torch (weights init) and the batch-sampling generator.
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:N``.
        resume: continue from ``output_dir/checkpoints/last``.
        time_budget_s: stop (with a checkpoint) once this much wall time has passed in this slice.
        fit_steps_to_budget: with ``time_budget_s`` on a fresh run: after :data:`PROBE_STEPS` steps, set
            ``steps`` to what fits the budget at the measured rate, so the learning-rate schedule ends
            with the budget (the total is kept for a resume).
        shift_px: random-shift augmentation in pixels (0: none).
        n_exec: actions executed per query when served (default: the recipe's).
        progress: show a tqdm progress bar.
    """

    dataset: str
    output_dir: str
    val_dataset: str | None = None
    recipe: str = "act"
    steps: int = 20000
    batch_size: int = 64
    save_every: int = 2000
    log_every: int = 50
    seed: int = 0
    device: str = "auto"
    resume: bool = False
    time_budget_s: float | None = None
    fit_steps_to_budget: bool = False
    shift_px: int = 4
    n_exec: int | None = None
    progress: bool = True
    extra: dict = field(default_factory=dict)


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; other values are checked.

    Raises:
        TrainingError: a CUDA device where torch sees none.
    """
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TrainingError(f"--device {device} but this torch ({torch.__version__}) sees no CUDA device; "
                            "use --device cpu (with --recipe act-small) or run on a GPU machine")
    return device


def _atomic_dir(final: Path) -> Path:
    tmp = final.parent / f".{final.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _write_json(path: Path, doc: Any) -> None:
    from rpent.recording.atomic import write_json_atomic

    write_json_atomic(path, doc)


def plot_losses(metrics: list[dict], path: Path) -> bool:
    """Training loss (and validation loss where measured) against steps, as a PNG (matplotlib, Agg).

    Returns False (and writes nothing) where matplotlib is not installed; ``rpent-train plot OUT``
    draws it later from ``metrics.jsonl``.
    """
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    tr = [m for m in metrics if "loss" in m]
    if tr:
        ax.plot([m["step"] for m in tr], [m["loss"] for m in tr], label="train loss", lw=1)
        if "l1_loss" in tr[0]:
            ax.plot([m["step"] for m in tr], [m["l1_loss"] for m in tr], label="train L1 (normalised actions)", lw=1)
    va = [m for m in metrics if "val_loss" in m]
    if va:
        ax.plot([m["step"] for m in va], [m["val_loss"] for m in va], "o-", label="validation L1", lw=1.5)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)
    return True


class Trainer:
    """One training run (see the module docstring); :meth:`run` trains until ``steps`` or the time budget.

    Raises (from the constructor):
        TrainingError: output directory exists without ``resume`` (or is missing with it), a resumed
            run with another dataset or recipe, no CUDA for a CUDA device.
        rpent.training.data.DatasetError: the dataset cannot be used.
    """

    def __init__(self, args: TrainArgs, log: Callable[[str], None] = print):
        import torch

        from rpent.models.torchvision_compat import import_torchvision
        from rpent.training.data import load_dataset

        import_torchvision()
        self.args = args
        self.log = log
        self.out = Path(args.output_dir).expanduser().resolve()
        last = self.out / "checkpoints" / "last"
        if args.resume and not last.exists():
            raise TrainingError(f"--resume: {self.out} has no checkpoints/last; start without --resume")
        if not args.resume and self.out.exists() and any(self.out.iterdir()):
            raise TrainingError(f"--output-dir {self.out} is not empty; pass --resume to continue it or a new directory")
        if args.steps < 1 or args.batch_size < 1 or args.save_every < 1 or args.log_every < 1:
            raise TrainingError("--steps, --batch-size, --save-every and --log-every must be >= 1")
        self.device = resolve_device(args.device)
        self.recipe = get_recipe(args.recipe)
        t0 = time.perf_counter()
        self.data = load_dataset(args.dataset, self.device)
        self.val = (load_dataset(args.val_dataset, self.device, task_table=self.data.tasks)
                    if args.val_dataset else None)
        log(f"dataset {self.data.info['root']}: {self.data.info['episodes']} episodes, {self.data.num_frames} frames, "
            f"{len(self.data.tasks)} tasks, images {self.data.info['image_shape']} "
            f"(loaded in {time.perf_counter() - t0:.1f} s on {self.device})"
            + (f"; validation {self.val.info['episodes']} episodes" if self.val else ""))
        if args.resume:
            saved = json.loads((self.out / "train_config.json").read_text(encoding="utf-8"))
            if saved["dataset"]["sha256"] != self.data.info["sha256"]:
                raise TrainingError(f"--resume: {args.dataset} is not the dataset this run started on "
                                    f"(sha256 {self.data.info['sha256'][:12]} vs {saved['dataset']['sha256'][:12]})")
            if saved["args"]["recipe"] != args.recipe:
                raise TrainingError(f"--resume: the run used recipe {saved['args']['recipe']!r}, not {args.recipe!r}")
        torch.manual_seed(args.seed)
        self.n_tasks = len(self.data.tasks)
        self.config = build_config(self.recipe, tuple(self.data.info["image_shape"]), self.n_tasks, self.device)
        from lerobot.optim.optimizers import AdamWConfig
        from lerobot.optim.schedulers import CosineDecayWithWarmupSchedulerConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        from rpent.models.lerobot.layout import ACTION_KEY, MAIN_KEY, STATE_KEY, WRIST_KEY

        stats = {ACTION_KEY: self.data.stats["actions"], STATE_KEY: self.data.stats["state"]}
        cams = self.data.image_stats()
        stats[MAIN_KEY], stats[WRIST_KEY] = cams["image"], cams["wrist_image"]
        self.stats = {k: {s: torch.as_tensor(v, dtype=torch.float32) for s, v in d.items()
                          if s in ("mean", "std", "min", "max")} for k, d in stats.items()}
        self.policy = get_policy_class(self.recipe.policy_type)(self.config).to(self.device)
        self.preprocessor, self.postprocessor = make_pre_post_processors(self.config, dataset_stats=self.stats)
        self.optim_cfg = AdamWConfig(lr=self.recipe.lr, weight_decay=self.recipe.weight_decay,
                                     grad_clip_norm=self.recipe.grad_clip)
        self.optimizer = self.optim_cfg.build(self.policy.get_optim_params())
        self._sched_cfg = CosineDecayWithWarmupSchedulerConfig(
            num_warmup_steps=self.recipe.warmup_steps, num_decay_steps=args.steps, peak_lr=self.recipe.lr,
            decay_lr=self.recipe.final_lr)
        if args.resume:  # the total a fitted run settled on
            st = json.loads((last / "training_state" / "training_state.json").read_text(encoding="utf-8"))
            saved_total = int(st.get("total_steps", args.steps))
            if args.fit_steps_to_budget:
                args.steps = saved_total
            self._sched_cfg.num_decay_steps = saved_total
        self.scheduler = self._sched_cfg.build(self.optimizer, self._sched_cfg.num_decay_steps)
        self.generator = torch.Generator(device=self.device).manual_seed(args.seed)
        self.step = 0
        self.metrics: list[dict] = []
        self.wall_s = 0.0
        self.n_params = sum(p.numel() for p in self.policy.parameters())
        if args.resume:
            self._load_state(last)
        else:
            self.out.mkdir(parents=True, exist_ok=True)
            _write_json(self.out / "train_config.json", self._train_config())
        log(f"{self.recipe.policy_type} ({args.recipe}): {self.n_params / 1e6:.1f} M parameters, step {self.step} of "
            f"{args.steps}, batch {args.batch_size}, chunk {self.recipe.chunk_size}")

    # ------------------------------------------------------------------ state
    def _train_config(self) -> dict:
        import torch

        import rpent

        return {
            "format": "rpent.train_config", "schema_version": 1,
            "args": {k: v for k, v in asdict(self.args).items() if k != "progress"},
            "recipe": asdict(self.recipe), "policy_config": json.loads(json.dumps(self._config_dict(), default=str)),
            "dataset": dict(self.data.info), "val_dataset": dict(self.val.info) if self.val else None,
            "tasks": list(self.data.tasks), "device": self.device, "parameters": self.n_params,
            "versions": {"rpent": getattr(rpent, "__version__", None), "torch": torch.__version__,
                         "lerobot": _version("lerobot")},
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def _config_dict(self) -> dict:
        import draccus

        return draccus.encode(self.config)

    def _rpent_policy(self) -> dict:
        from rpent.models.lerobot.layout import FORMAT, MAIN_KEY, SCHEMA_VERSION, STATE_KEY, TASK_KEY, WRIST_KEY

        return {
            "format": FORMAT, "schema_version": SCHEMA_VERSION, "policy_type": self.recipe.policy_type,
            "cameras": {"main": MAIN_KEY, "wrist": WRIST_KEY}, "state_key": STATE_KEY,
            "task_conditioning": {"kind": "one_hot", "key": TASK_KEY, "tasks": list(self.data.tasks)},
            "image_size": int(self.data.info["image_shape"][0]), "state_dim": 8, "action_dim": 7,
            "fps": int(self.data.info["fps"]), "n_exec": int(self.args.n_exec or self.recipe.n_exec),
            "dataset": {k: self.data.info[k] for k in ("root", "repo_id", "sha256", "episodes", "frames")},
            "training": {"recipe": self.args.recipe, "steps": self.step, "batch_size": self.args.batch_size,
                         "seed": self.args.seed, "device": self.device, "wall_s": round(self.wall_s, 1),
                         "device_name": _device_name(self.device), "parameters": self.n_params,
                         "train_config": str(self.out / "train_config.json")},
        }

    def save_checkpoint(self) -> Path:
        """Write ``checkpoints/<step>/`` (complete, then renamed) and point ``last`` at it; returns its path."""
        import torch
        from safetensors.torch import save_file

        ckpts = self.out / "checkpoints"
        ckpts.mkdir(parents=True, exist_ok=True)
        final = ckpts / f"{self.step:06d}"
        tmp = _atomic_dir(final)
        pre = tmp / "pretrained_model"
        self.policy.save_pretrained(pre)
        self.preprocessor.save_pretrained(pre)
        self.postprocessor.save_pretrained(pre)
        _write_json(pre / "rpent_policy.json", self._rpent_policy())
        if self.metrics:
            plot_losses(self.metrics, pre / "loss.png")
        st = tmp / "training_state"
        st.mkdir()
        opt = self.optimizer.state_dict()
        tensors, layout = {}, {}
        for pid, s in opt["state"].items():
            for k, v in s.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"{pid}.{k}"] = v.detach().contiguous().cpu()
                else:
                    layout.setdefault(str(pid), {})[k] = v
        tensors["generator"] = self.generator.get_state().cpu()
        tensors["torch_rng"] = torch.get_rng_state()
        save_file(tensors, str(st / "optimizer_state.safetensors"))
        _write_json(st / "training_state.json", {
            "step": self.step, "wall_s": self.wall_s, "param_groups": opt["param_groups"], "scalars": layout,
            "total_steps": self.args.steps,
            "scheduler": self.scheduler.state_dict(), "metrics_lines": len(self.metrics),
        })
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        link = ckpts / "last"
        tmp_link = ckpts / f".last.{os.getpid()}"
        if tmp_link.is_symlink() or tmp_link.exists():
            tmp_link.unlink()
        os.symlink(final.name, tmp_link)
        os.replace(tmp_link, link)
        return final

    def _load_state(self, last: Path) -> None:
        import torch
        from safetensors.torch import load_file, load_model

        pre = last / "pretrained_model"
        missing, unexpected = load_model(self.policy, str(pre / "model.safetensors"), strict=True, device=self.device)
        st = json.loads((last / "training_state" / "training_state.json").read_text(encoding="utf-8"))
        tensors = load_file(str(last / "training_state" / "optimizer_state.safetensors"))
        state: dict = {}
        for key, v in tensors.items():
            if key in ("generator", "torch_rng"):
                continue
            pid, name = key.split(".", 1)
            state.setdefault(int(pid), {})[name] = v.to(self.device)
        for pid, scalars in st["scalars"].items():
            state.setdefault(int(pid), {}).update(scalars)
        self.optimizer.load_state_dict({"state": state, "param_groups": st["param_groups"]})
        self.scheduler.load_state_dict(st["scheduler"])
        self.generator.set_state(tensors["generator"].to(torch.uint8).cpu())
        torch.set_rng_state(tensors["torch_rng"].to(torch.uint8))
        self.step = int(st["step"])
        self.wall_s = float(st["wall_s"])
        lines = (self.out / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if (self.out / "metrics.jsonl").exists() else []
        self.metrics = [json.loads(x) for x in lines[: int(st["metrics_lines"])]]
        with open(self.out / "metrics.jsonl", "w", encoding="utf-8") as f:  # drop lines past the checkpoint
            f.writelines(json.dumps(m) + "\n" for m in self.metrics)
        self.log(f"resumed from {last.resolve().name}: step {self.step}, {self.wall_s:.0f} s trained so far")

    # ------------------------------------------------------------------ loop
    def _batch(self, data) -> dict:
        """A normalised training batch; Diffusion Policy's observations get its observation-step axis
        ([B, 1, ...]: the recipes use one observation step)."""
        from rpent.training.data import sample_batch

        batch = self.preprocessor(sample_batch(data, self.args.batch_size, self.recipe.chunk_size, self.generator,
                                               self.n_tasks, shift_px=self.args.shift_px if data is self.data else 0))
        if self.recipe.policy_type == "diffusion":
            batch = {k: (v.unsqueeze(1) if k.startswith("observation.") and hasattr(v, "unsqueeze") else v)
                     for k, v in batch.items()}
        return batch

    def val_loss(self, batches: int = 8) -> float:
        """Mean L1 between normalised predicted and recorded action chunks on the validation split
        (policy in eval mode: ACT without its VAE latent), over ``batches`` batches from a fixed generator."""
        import torch

        from rpent.models.lerobot.layout import ACTION_KEY

        g = torch.Generator(device=self.device).manual_seed(1234)
        saved, self.generator = self.generator, g
        self.policy.eval()
        total = 0.0
        try:
            with torch.no_grad():
                for _ in range(batches):
                    b = self._batch(self.val)
                    pred = self.policy.predict_action_chunk(b) if self.recipe.policy_type == "act" else None
                    if pred is None:
                        loss, _ = self.policy.forward(b)
                        total += float(loss)
                        continue
                    mask = ~b["action_is_pad"].unsqueeze(-1)
                    total += float((torch.abs(pred - b[ACTION_KEY]) * mask).sum() / (mask.sum() * pred.shape[-1]))
        finally:
            self.generator = saved
            self.policy.train()
        return total / batches

    def _fit_steps(self, elapsed: float, bar) -> None:
        """Set ``steps`` to what fits the time budget at the rate of the first steps; rebuild the schedule
        for that total and move it to the current step."""
        rate = self.step / max(elapsed, 1e-9)
        total = max(self.step + 1, int(rate * self.args.time_budget_s * 0.97))
        self.args.steps = total
        self._sched_cfg.num_decay_steps = total
        self.scheduler = self._sched_cfg.build(self.optimizer, total)
        for _ in range(self.step):
            self.scheduler.step()
        bar.total = total
        bar.refresh()
        self.log(f"{rate:.1f} steps/s over the first {self.step} steps: {total} steps fit the {self.args.time_budget_s:.0f} s "
                 "budget; the schedule now ends there")
        _write_json(self.out / "train_config.json", {**json.loads((self.out / "train_config.json").read_text()),
                                                       "fitted_steps": total, "probe_steps_per_s": round(rate, 2)})

    def run(self) -> dict:
        """Train until ``steps`` (or the time budget); checkpoint every ``save_every`` and at the end.

        Returns:
            ``{"step", "checkpoint", "wall_s", "stopped": "done" | "time_budget"}``.
        """
        import torch
        from tqdm import tqdm

        args = self.args
        self.policy.train()
        amp = self.device.startswith("cuda")
        t_start = time.perf_counter()
        t_log, s_log = t_start, self.step
        stopped = "done"
        bar = tqdm(total=args.steps, initial=self.step, desc="training", unit="step", disable=not args.progress,
                   dynamic_ncols=True)
        metrics_file = open(self.out / "metrics.jsonl", "a", encoding="utf-8")
        ckpt = None
        fit = args.fit_steps_to_budget and args.time_budget_s is not None and self.step == 0
        try:
            while self.step < args.steps:
                if fit and self.step == PROBE_STEPS:
                    self._fit_steps(time.perf_counter() - t_start, bar)
                    fit = False
                batch = self._batch(self.data)
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=amp):
                    loss, info = self.policy.forward(batch)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                gnorm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.recipe.grad_clip)
                self.optimizer.step()
                self.scheduler.step()
                self.step += 1
                bar.update(1)
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value):
                    raise TrainingError(f"loss is {loss_value} at step {self.step}; lower the learning rate or check "
                                        "the dataset statistics")
                if self.step % args.log_every == 0 or self.step == args.steps:
                    now = time.perf_counter()
                    m = {"step": self.step, "loss": loss_value, "grad_norm": float(gnorm),
                         "lr": self.scheduler.get_last_lr()[0], "steps_per_s": (self.step - s_log) / max(now - t_log, 1e-9)}
                    m.update({k: float(v) for k, v in (info or {}).items() if isinstance(v, (int, float))})
                    t_log, s_log = now, self.step
                    self.metrics.append(m)
                    metrics_file.write(json.dumps(m) + "\n")
                    metrics_file.flush()
                    bar.set_postfix(loss=f"{m['loss']:.4f}", lr=f"{m['lr']:.1e}")
                out_of_time = args.time_budget_s is not None and time.perf_counter() - t_start >= args.time_budget_s
                if self.step % args.save_every == 0 or self.step == args.steps or out_of_time:
                    if self.val is not None:
                        v = {"step": self.step, "val_loss": self.val_loss()}
                        self.metrics.append(v)
                        metrics_file.write(json.dumps(v) + "\n")
                        metrics_file.flush()
                    self.wall_s += time.perf_counter() - t_start
                    t_start = time.perf_counter()
                    ckpt = self.save_checkpoint()
                    plot_losses(self.metrics, self.out / "loss.png")
                    bar.write(f"checkpoint {ckpt}")
                    if out_of_time and self.step < args.steps:
                        stopped = "time_budget"
                        break
        finally:
            bar.close()
            metrics_file.close()
        return {"step": self.step, "checkpoint": str(ckpt) if ckpt else None, "wall_s": round(self.wall_s, 1),
                "stopped": stopped}


def export_compact(pretrained: str | Path, dest: str | Path, dtype: str = "float16") -> Path:
    """Copy a ``pretrained_model`` directory with its weights stored as ``dtype`` (half the bytes).

    Loading casts them back into the float32 model (``load_state_dict`` copies), so the copy serves
    with weights rounded to ``dtype``. For moving a checkpoint over a link with a size limit.

    Raises:
        FileExistsError: ``dest`` exists.
    """
    import torch
    from safetensors.torch import load_file, save_file

    src, dest = Path(pretrained), Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} exists")
    tmp = _atomic_dir(dest)
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy2(f, tmp / f.name)
    tensors = load_file(str(src / "model.safetensors"))
    dt = getattr(torch, dtype)
    save_file({k: (v.to(dt) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()},
              str(tmp / "model.safetensors"), metadata={"rpent_compact_dtype": dtype})
    os.replace(tmp, dest)
    return dest


def _version(pkg: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(pkg)
    except Exception:  # noqa: BLE001 - provenance only
        return None


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return platform.processor() or platform.machine()
