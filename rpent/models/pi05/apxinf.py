"""Pi0.5 through APXinf-robo's L1 bare-model API, with our own pre- and post-processing.

APXinf-robo (RLinf/APXinf-robo) wraps ApxInf, an in-process Rust/CUDA Pi0.5 engine. Its L1 API
(reference ``vla_pi05_reference.md`` section 3; seed 003) is::

    handle = apxinf_robo.load_bare_model(model_dir, model="pi05", device="cuda:0", precision="bf16",
                                         action_horizon=10, num_views=2)
    normalized = handle.infer_rgb(rgb_u8,            # uint8 [views, S, S, 3] (layout "nhwc")
                                  layout="nhwc",
                                  token_ids=ids,     # uint32 [T], exact prompt length
                                  noise=noise)       # float32 [H, 32] or None (engine samples)
    # -> float32 [H, 32] in the quantile-normalised domain
    handle.action_horizon, handle.action_dim, handle.num_views, handle.image_size, handle.max_token_len

The handle is *thread-bound*: it is loaded and called on one thread (the server's batch worker,
see :class:`rpent.models.pi05.batching.DynamicBatcher` ``initializer``). Everything around the engine
is ours and shared with :class:`rpent.models.pi05.policy.Pi05Policy`: request validation, prompt
tokenisation and state normalisation (:class:`Pi05Processor`), openpi ``resize_with_pad`` to S x S
uint8 (:func:`resize_with_pad_u8`), quantile un-normalisation and the embodiment output transforms.

Eval mode only (seed 000: "适配器仅支持 eval 模式"); presets ``libero``, ``dual_franka``, ``yam``;
single-arm ``franka`` is not supported. ``apxinf_robo`` is imported lazily: this module imports
without it, and :func:`import_backend` names the install steps when it is missing.

Noise: the server's noise (``noise_source`` "server", optionally seeded) is sampled here with numpy and
passed explicitly, so ``seed`` means the same on this server and the Pi0.5 server; ``observation``
noise is passed through unchanged (seed 003: paired numerical tests with [B, 10, 32] noise).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import threading
from pathlib import Path
from types import ModuleType

import numpy as np

from rpent.models.pi05.checkpoint import TOKENIZER_FILENAMES
from rpent.models.pi05.normalization import NormStats
from rpent.models.pi05.processor import ObservationError, Pi05Processor, PreparedRequest, resize_with_pad_u8
from rpent.models.pi05.settings import ConfigCheckError, ServingSettings, resolve_settings
from rpent.models.pi05.tokenizer import PromptTokenizer
from rpent.models.weights import REFETCH, check_safetensors

#: Python module providing ``load_bare_model`` (APXinf-robo's L1 API).
APXINF_BACKEND_MODULE = "apxinf_robo"
#: What to do when it is missing (seed 000, "APXInf VLA 服务（可选）").
INSTALL_HINT = (
    "install APXinf-robo with its apxinf_py CUDA binding into this Python environment, following the "
    "APXinf-robo install guide (https://github.com/RLinf/APXinf-robo); its 'libero' and 'serve' extras are "
    "not needed for the rpent RPC endpoint. Check with: python -c 'from apxinf_robo import load_bare_model'"
)
#: Presets the adapter serves (seed 000); all need APXInf-compatible weights exported for that robot.
APXINF_EMBODIMENTS = ("libero", "dual_franka", "yam")
#: Precisions ApxInf accepts (reference section 3: fp8 needs a calibration, int8 is W8A8 PTQ).
APXINF_PRECISIONS = ("bf16", "fp8", "int8", "auto")
#: The only supported mode.
APXINF_MODES = ("eval",)


class ApxInfUnavailable(RuntimeError):
    """``apxinf_robo`` (or the configured backend module) cannot be imported or lacks the L1 API."""


class ApxInfMismatch(ValueError):
    """The loaded APXInf model does not fit the chosen embodiment preset (views, horizon, dims)."""


def import_backend(module_name: str = APXINF_BACKEND_MODULE) -> ModuleType:
    """Import the module that provides ``load_bare_model`` (default ``apxinf_robo``).

    ``module_name`` is the documented test hook: any importable module with the L1 signature
    (``tests/components/apxinf_standin.py`` is a small stand-in used by the tests).

    Raises:
        ApxInfUnavailable: not importable (message carries :data:`INSTALL_HINT`) or no ``load_bare_model``.
    """
    try:
        mod = importlib.import_module(module_name)
    except ImportError as exc:
        raise ApxInfUnavailable(f"cannot import {module_name!r} ({exc}): {INSTALL_HINT}") from None
    if not callable(getattr(mod, "load_bare_model", None)):
        raise ApxInfUnavailable(f"module {module_name!r} has no load_bare_model(...): the adapter needs APXinf-robo's L1 "
                                f"bare-model API; {INSTALL_HINT}")
    return mod


def check_embodiment(name: str) -> None:
    """Refuse presets the adapter does not serve.

    Raises:
        ValueError: ``franka`` (single-arm Franka is unsupported, seed 000) or an unknown name.
    """
    if name == "franka":
        raise ValueError("embodiment 'franka' (single-arm Franka) is not supported by the APXInf adapter; "
                         f"use one of {list(APXINF_EMBODIMENTS)}")
    if name not in APXINF_EMBODIMENTS:
        raise ValueError(f"unknown embodiment {name!r} for the APXInf adapter; use one of {list(APXINF_EMBODIMENTS)}")


def _find_tokenizer(model_dir: Path, tokenizer_path: str | os.PathLike | None) -> Path:
    if tokenizer_path is not None:
        p = Path(tokenizer_path)
        if not p.is_file():
            raise FileNotFoundError(f"--tokenizer-path {p} does not exist: pass the PaliGemma SentencePiece model "
                                    "(paligemma_tokenizer.model)")
        return p
    for name in TOKENIZER_FILENAMES:
        if (model_dir / name).is_file():
            return model_dir / name
    raise FileNotFoundError(f"no tokenizer in {model_dir} (looked for {list(TOKENIZER_FILENAMES)}): pass --tokenizer-path "
                            "to the PaliGemma SentencePiece model")


def _find_norm_stats(model_dir: Path, norm_stats_path: str | os.PathLike | None) -> Path:
    p = Path(norm_stats_path) if norm_stats_path is not None else model_dir / "norm_stats.json"
    if not p.is_file():
        raise FileNotFoundError(f"norm stats {p} not found: pass --norm-stats-path (for LIBERO, openpi's "
                                "physical-intelligence/libero/norm_stats.json) or put norm_stats.json at the model root")
    return p


class ApxInfPolicy:
    """Predicts env actions for ``vla.predict`` observations with an APXInf L1 model handle.

    Same stage interface as :class:`rpent.models.pi05.policy.Pi05Policy` (``prepare`` on handler threads,
    ``run_prepared`` on the one worker thread, ``finish``, ``metadata``), so
    :class:`rpent.robots.components.pi05_vla_server.Pi05VlaServer` serves it unchanged. Build with
    :meth:`create`, then call :meth:`load` on the thread that will run ``run_prepared``.

    Attributes:
        handle: the L1 model handle (None before :meth:`load`).
        settings: preset + overrides (action horizon H, n_exec, flow steps).
    """

    def __init__(self, backend: ModuleType, model_dir: Path, settings: ServingSettings, tokenizer: PromptTokenizer,
                 norm_stats: NormStats, device: str, precision: str):
        self.backend = backend
        self.model_dir = model_dir
        self.settings = settings
        self.tokenizer = tokenizer
        self.norm_stats = norm_stats
        self.device = device
        self.precision = precision
        self.handle = None
        self.processor: Pi05Processor | None = None
        self.image_size = 0
        self.model_action_dim = 0
        self._owner: int | None = None

    @classmethod
    def create(
        cls,
        backend: ModuleType,
        model_dir: str | os.PathLike,
        embodiment: str = "libero",
        tokenizer_path: str | os.PathLike | None = None,
        norm_stats_path: str | os.PathLike | None = None,
        device: str = "cuda:0",
        precision: str = "bf16",
        action_horizon: int | None = None,
        n_exec: int | None = None,
        num_flow_steps: int | None = None,
        state_in_prompt: str = "auto",
    ) -> "ApxInfPolicy":
        """Check the arguments and read the tokenizer and norm stats (the model is not loaded yet).

        Args:
            backend: module from :func:`import_backend`.
            model_dir: APXInf-compatible Pi0.5 weights (config.json + model.safetensors), e.g.
                ``lerobot/pi05_libero_base``; RLinf ``full_weights.pt`` is not converted (seed 000).
            embodiment: ``libero`` | ``dual_franka`` | ``yam``.
            tokenizer_path: PaliGemma SentencePiece model (default: ``paligemma_tokenizer.model`` or
                ``tokenizer.model`` in ``model_dir``).
            norm_stats_path: openpi ``norm_stats.json`` (default ``model_dir/norm_stats.json``).
            device: ``cuda:N``. precision: one of :data:`APXINF_PRECISIONS`.
            action_horizon, n_exec, num_flow_steps, state_in_prompt: overrides of the preset
                (:func:`rpent.models.pi05.settings.resolve_settings`).

        Raises:
            ValueError: unsupported embodiment/precision; ConfigCheckError: contradictory settings;
            FileNotFoundError: missing model directory, tokenizer or norm stats;
            rpent.models.pi05.normalization.NormStatsError, rpent.models.pi05.tokenizer.TokenizerError;
            rpent.models.weights.WeightsFileError: a ``*.safetensors`` file of ``model_dir`` is
            truncated or not safetensors (checked here, before the engine sees it).
        """
        check_embodiment(embodiment)
        if precision not in APXINF_PRECISIONS:
            raise ValueError(f"precision must be one of {list(APXINF_PRECISIONS)}, got {precision!r}")
        d = Path(model_dir)
        if not d.is_dir():
            raise FileNotFoundError(f"--model-path {d} is not a directory: pass APXInf-compatible Pi0.5 weights "
                                    "(config.json + model.safetensors, e.g. lerobot/pi05_libero_base)")
        for weights in sorted(d.glob("*.safetensors")):
            check_safetensors(weights, fix=f"{REFETCH} (the APXInf model directory {d} is damaged)")
        ckpt_cfg = None
        if (d / "config.json").is_file():
            try:
                ckpt_cfg = json.loads((d / "config.json").read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"cannot read {d / 'config.json'}: {exc}") from None
        settings = resolve_settings(embodiment, action_horizon, n_exec, num_flow_steps, state_in_prompt,
                                    ckpt_cfg if isinstance(ckpt_cfg, dict) else None)
        tokenizer = PromptTokenizer(_find_tokenizer(d, tokenizer_path))
        norm_stats = NormStats.load(_find_norm_stats(d, norm_stats_path))
        if norm_stats.actions.dim < settings.preset.action_dim:
            raise ApxInfMismatch(
                f"norm stats 'actions' cover {norm_stats.actions.dim} dims but embodiment {embodiment!r} returns "
                f"{settings.preset.action_dim}: choose the APXInf-robo preset, weights and norm stats that match --embodiment")
        return cls(backend, d, settings, tokenizer, norm_stats, device, precision)

    # ------------------------------------------------------------------ loading (worker thread)
    def _load_kwargs(self) -> dict:
        s = self.settings
        kwargs = {"model": "pi05", "device": self.device, "precision": self.precision,
                  "action_horizon": s.action_horizon, "num_views": s.preset.num_views}
        try:
            params = inspect.signature(self.backend.load_bare_model).parameters
        except (TypeError, ValueError):
            params = {}
        for name in ("num_flow_steps", "num_steps"):  # passed only where the backend names it explicitly
            if name in params:
                kwargs[name] = s.num_flow_steps
                break
        return kwargs

    def load(self) -> None:
        """Load the L1 handle on the calling thread and check it against the preset.

        Raises:
            ApxInfMismatch: views / action horizon / action width / flow steps differ from the preset
                (message says to choose the matching preset, weights and stats);
            whatever ``load_bare_model`` raises (wrong weights, no kernel for this GPU, ...).
        """
        s, p = self.settings, self.settings.preset
        handle = self.backend.load_bare_model(str(self.model_dir), **self._load_kwargs())
        fix = "choose the APXInf-robo preset, weights and norm stats that match --embodiment"
        views = int(handle.num_views)
        if views != p.num_views:
            raise ApxInfMismatch(f"active camera views {p.num_views} (embodiment {p.name!r}) but the ApxInf checkpoint "
                                 f"expects {views}: {fix}")
        if int(handle.action_horizon) != s.action_horizon:
            raise ApxInfMismatch(f"ApxInf model action_horizon {handle.action_horizon} != configured {s.action_horizon}: "
                                 "pass --action-horizon to match")
        adim = int(handle.action_dim)
        if adim < p.action_dim:
            raise ApxInfMismatch(f"ApxInf model outputs {adim}-d actions but embodiment {p.name!r} needs {p.action_dim}: {fix}")
        steps = getattr(handle, "num_flow_steps", getattr(handle, "num_steps", None))
        if steps is not None and int(steps) != s.num_flow_steps:
            raise ConfigCheckError(f"num_flow_steps ({s.num_flow_steps}) must match the ApxInf model's num_steps ({steps}): "
                                   "pass --num-flow-steps to match")
        self.image_size = int(handle.image_size)
        self.model_action_dim = adim
        self.tokenizer.max_token_len = min(self.tokenizer.max_token_len, int(handle.max_token_len))
        self.processor = Pi05Processor(p, self.norm_stats, self.tokenizer, s.discrete_state_input, adim)
        self.handle = handle
        self._owner = threading.get_ident()

    # ------------------------------------------------------------------ serving
    def metadata(self) -> dict:
        """``vla.metadata`` (docs/interfaces.md) plus backend, precision, device and model directory."""
        s = self.settings
        return {
            "embodiment": s.preset.name,
            "action_dim": s.preset.action_dim,
            "action_horizon": s.action_horizon,
            "n_exec": s.n_exec,
            "num_flow_steps": s.num_flow_steps,
            "num_views": s.preset.num_views,
            "image_size": self.image_size,
            "state_dim": s.preset.state_dim,
            "discrete_state_input": s.discrete_state_input,
            "max_action_dim": self.model_action_dim,
            "max_token_len": self.tokenizer.max_token_len,
            "backend": "apxinf",
            "precision": self.precision,
            "device": self.device,
            "checkpoint": str(self.model_dir),
        }

    def prepare(self, observation: dict, options: dict | None = None) -> PreparedRequest:
        """Validate, tokenise, sample noise and resize views to S x S uint8 (thread-safe).

        Raises:
            ObservationError, ConfigCheckError (``options['num_flow_steps']`` != the configured steps).
        """
        if self.processor is None:
            raise RuntimeError("the APXInf model is not loaded yet")
        if options is not None and not isinstance(options, dict):
            raise ObservationError(f"options must be a dict or None, got {type(options).__name__}")
        nf = (options or {}).get("num_flow_steps")
        if nf is not None and nf != self.settings.num_flow_steps:
            raise ConfigCheckError(f"num_flow_steps ({nf}) must match the configured num_steps ({self.settings.num_flow_steps}): "
                                   f"restart the adapter with --num-flow-steps {nf}")
        req = self.processor.prepare(observation, options, self.settings.action_horizon)
        b, v, h, w, _ = req.images.shape
        req.images = resize_with_pad_u8(req.images.reshape(b * v, h, w, 3), self.image_size).reshape(
            b, v, self.image_size, self.image_size, 3)
        return req

    def run_prepared(self, requests: list[PreparedRequest]) -> list[np.ndarray]:
        """One ``infer_rgb`` per batch row, on the loading thread; returns each request's normalised
        chunk float32 [B_i, H, D] (D = the model's padded action width, 32).

        Raises:
            RuntimeError: called from another thread than :meth:`load`, or the engine returned another shape.
        """
        if self.handle is None or threading.get_ident() != self._owner:
            raise RuntimeError("the APXInf L1 handle is thread-bound: run_prepared must run on the thread that called load()")
        hz, d = self.settings.action_horizon, self.model_action_dim
        out = []
        for r in requests:
            rows = np.empty((r.batch_size, hz, d), dtype=np.float32)
            for i in range(r.batch_size):
                a = np.asarray(self.handle.infer_rgb(np.ascontiguousarray(r.images[i]), layout="nhwc",
                                                     token_ids=np.asarray(r.token_ids[i], dtype=np.uint32),
                                                     noise=np.ascontiguousarray(r.noise[i], dtype=np.float32)))
                if a.shape != (hz, d):
                    raise RuntimeError(f"ApxInf infer_rgb returned shape {list(a.shape)}, expected [{hz}, {d}]")
                rows[i] = a
            out.append(rows)
        return out

    def finish(self, request: PreparedRequest, normalized: np.ndarray) -> np.ndarray:
        """Normalised chunk -> env actions float32 [B, n_exec, action_dim] (quantile un-normalisation,
        embodiment transform)."""
        return self.processor.postprocess(normalized[:, : self.settings.n_exec], request.states)


__all__ = ["APXINF_BACKEND_MODULE", "APXINF_EMBODIMENTS", "APXINF_MODES", "APXINF_PRECISIONS", "ApxInfMismatch",
           "ApxInfPolicy", "ApxInfUnavailable", "INSTALL_HINT", "check_embodiment", "import_backend"]
