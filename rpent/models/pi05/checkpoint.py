"""Pi0.5 checkpoint directories: verification (the OK/MISS list), tensor key schema and loading.

Two on-disk layouts carry the same tensor names (reference section 2):

* ``openpi`` - the openpi PyTorch conversion (``examples/convert_jax_model_to_pytorch.py``) and RLinf's
  safetensors checkpoints (e.g. RLinf-Pi05-LIBERO-130-fullshot-SFT): keys start with
  ``paligemma_with_expert.`` / ``action_in_proj`` ... with no prefix.
* ``lerobot`` - ``lerobot/pi05_libero_base`` / ``lerobot/pi05_base``: the same keys under a ``model.`` prefix.

Both need ``config.json``, ``model.safetensors`` (or shards ``*.safetensors``) and ``norm_stats.json`` at the
root (seed 003, "验证 checkpoint"), plus the PaliGemma SentencePiece tokenizer (in the directory or given
with ``--tokenizer-path``). Loading asserts that every model tensor came from the file: a missing,
unexpected or mis-shaped tensor is an error listing them (a silently random model is a bug).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rpent.models.pi05.config import Pi05Config

LAYOUTS = ("openpi", "lerobot")
#: Key prefix per layout (lerobot wraps the openpi module in ``model.``; see lerobot
#: ``PI05Policy._fix_pytorch_state_dict_keys`` and ApxInf ``weights.rs`` which accept both).
LAYOUT_PREFIX = {"openpi": "", "lerobot": "model."}

PALI = "paligemma_with_expert.paligemma."
VISION = PALI + "model.vision_tower.vision_model."
LANG = PALI + "model.language_model."
EXPERT = "paligemma_with_expert.gemma_expert."

#: Stored by real checkpoints but never read at inference: accepted and skipped when present.
#: ``paligemma.lm_head`` is tied to ``embed_tokens`` (used in its place when ``embed_tokens`` is absent,
#: as lerobot does); the expert's ``lm_head`` exists because openpi builds it as GemmaForCausalLM.
OPTIONAL_UNUSED_KEYS = (
    PALI + "lm_head.weight",
    EXPERT + "lm_head.weight",
    EXPERT + "model.embed_tokens.weight",
)
#: Older pi0-era names that lerobot renames on load.
LEGACY_RENAMES = {"action_time_mlp_in.": "time_mlp_in.", "action_time_mlp_out.": "time_mlp_out."}

#: SHA256 of the real PaliGemma tokenizer model (pinned by ApxInf; reference section 2).
PALIGEMMA_TOKENIZER_SHA256 = "8986bb4f423f07f8c7f70d0dbe3526fb2316056c17bae71b1ea975e77a168fc6"
TOKENIZER_FILENAMES = ("paligemma_tokenizer.model", "tokenizer.model")
#: Where openpi / RLinf keep the LIBERO norm stats below the checkpoint root.
NORM_STATS_SUBPATHS = (
    "assets/physical-intelligence/libero/norm_stats.json",
    "physical-intelligence/libero/norm_stats.json",
)


class CheckpointError(RuntimeError):
    """A checkpoint directory or its tensors cannot be used; the message names the problem and the fix."""


class DamagedWeightsError(CheckpointError):
    """A weight file of the checkpoint is truncated or not safetensors (one line: file, problem, fix;
    see :class:`rpent.models.weights.WeightsFileError`)."""


def expected_tensor_shapes(cfg: Pi05Config, include_unused: bool = False) -> dict[str, tuple[int, ...]]:
    """Checkpoint tensor names (openpi layout, no prefix) and shapes for ``cfg``.

    Args:
        cfg: model dimensions.
        include_unused: also list ``gemma_expert.lm_head.weight`` (stored by real checkpoints, unused;
            used for parameter counting only).

    Returns:
        ordered dict key -> shape. Linear weights are [out, in] (PyTorch convention).
    """
    v, b, e = cfg.vision, cfg.backbone, cfg.expert
    s: dict[str, tuple[int, ...]] = {}
    s[VISION + "embeddings.patch_embedding.weight"] = (v.width, 3, v.patch_size, v.patch_size)
    s[VISION + "embeddings.patch_embedding.bias"] = (v.width,)
    s[VISION + "embeddings.position_embedding.weight"] = (v.num_patches, v.width)
    for i in range(v.depth):
        p = f"{VISION}encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            s[p + n + ".weight"] = (v.width,)
            s[p + n + ".bias"] = (v.width,)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            s[p + f"self_attn.{n}.weight"] = (v.width, v.width)
            s[p + f"self_attn.{n}.bias"] = (v.width,)
        s[p + "mlp.fc1.weight"] = (v.mlp_dim, v.width)
        s[p + "mlp.fc1.bias"] = (v.mlp_dim,)
        s[p + "mlp.fc2.weight"] = (v.width, v.mlp_dim)
        s[p + "mlp.fc2.bias"] = (v.width,)
    s[VISION + "post_layernorm.weight"] = (v.width,)
    s[VISION + "post_layernorm.bias"] = (v.width,)
    s[PALI + "model.multi_modal_projector.linear.weight"] = (b.width, v.width)
    s[PALI + "model.multi_modal_projector.linear.bias"] = (b.width,)
    s[LANG + "embed_tokens.weight"] = (cfg.vocab_size, b.width)
    for prefix, g, ada in ((LANG, b, False), (EXPERT + "model.", e, True)):
        for i in range(g.depth):
            p = f"{prefix}layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm"):
                if ada:
                    s[p + n + ".dense.weight"] = (3 * g.width, e.width)
                    s[p + n + ".dense.bias"] = (3 * g.width,)
                else:
                    s[p + n + ".weight"] = (g.width,)
            s[p + "self_attn.q_proj.weight"] = (g.num_heads * g.head_dim, g.width)
            s[p + "self_attn.k_proj.weight"] = (g.num_kv_heads * g.head_dim, g.width)
            s[p + "self_attn.v_proj.weight"] = (g.num_kv_heads * g.head_dim, g.width)
            s[p + "self_attn.o_proj.weight"] = (g.width, g.num_heads * g.head_dim)
            s[p + "mlp.gate_proj.weight"] = (g.mlp_dim, g.width)
            s[p + "mlp.up_proj.weight"] = (g.mlp_dim, g.width)
            s[p + "mlp.down_proj.weight"] = (g.width, g.mlp_dim)
    s[LANG + "norm.weight"] = (b.width,)
    s[EXPERT + "model.norm.dense.weight"] = (3 * e.width, e.width)
    s[EXPERT + "model.norm.dense.bias"] = (3 * e.width,)
    a = cfg.max_action_dim
    s["action_in_proj.weight"] = (e.width, a)
    s["action_in_proj.bias"] = (e.width,)
    s["action_out_proj.weight"] = (a, e.width)
    s["action_out_proj.bias"] = (a,)
    for n in ("time_mlp_in", "time_mlp_out"):
        s[n + ".weight"] = (e.width, e.width)
        s[n + ".bias"] = (e.width,)
    if include_unused:
        s[EXPERT + "lm_head.weight"] = (cfg.vocab_size, e.width)
    return s


def tensor_group(key: str) -> str:
    """Component a checkpoint key belongs to (for :func:`rpent.models.pi05.config.parameter_counts`)."""
    if key in (LANG + "norm.weight", EXPERT + "lm_head.weight"):
        return "stored_unused"
    if key.startswith(VISION) or "multi_modal_projector" in key:
        return "vision"
    if key.startswith(LANG + "embed_tokens"):
        return "embedding"
    if key.startswith(LANG):
        return "backbone"
    if key.startswith(EXPERT):
        return "adarms" if "layernorm.dense" in key or "norm.dense" in key else "expert"
    return "action_time"


# --------------------------------------------------------------------------- directory checks


@dataclass
class CheckpointFileCheck:
    """One line of the OK/MISS list: ``status`` is "OK" or "MISS"; ``hint`` says where to get the file."""

    status: str
    name: str
    path: Path | None = None
    hint: str = ""

    def line(self) -> str:
        """``"OK   config.json"`` / ``"MISS norm_stats.json  <- hint"`` (seed 003's format plus the hint)."""
        text = f"{self.status:<4} {self.name}"
        if self.status == "OK" and self.path is not None and self.path.name != self.name:
            text += f"  ({self.path})"
        if self.hint:
            text += f"  <- {self.hint}"
        return text


@dataclass
class CheckpointReport:
    """Result of :func:`verify_checkpoint_dir`."""

    directory: Path
    checks: list[CheckpointFileCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every required file is present."""
        return all(c.status == "OK" for c in self.checks)

    def lines(self) -> list[str]:
        """The OK/MISS list, one string per file."""
        return [c.line() for c in self.checks]

    def get(self, name: str) -> CheckpointFileCheck:
        """The check for ``name`` (e.g. "norm_stats.json"). Raises KeyError if unknown."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def raise_if_missing(self) -> None:
        """Raise :class:`CheckpointError` with the whole OK/MISS list when any file is missing."""
        if not self.ok:
            missing = ", ".join(c.name for c in self.checks if c.status != "OK")
            raise CheckpointError(
                f"checkpoint directory {self.directory} is incomplete (missing: {missing}):\n  " + "\n  ".join(self.lines())
            )


def safetensors_files(directory: Path) -> list[Path]:
    """``model.safetensors`` if present, else every ``*.safetensors`` at the root (sharded/RLinf dumps)."""
    single = directory / "model.safetensors"
    if single.is_file():
        return [single]
    return sorted(p for p in directory.glob("*.safetensors") if p.is_file())


def find_tokenizer(directory: Path | None, tokenizer_path: str | os.PathLike | None) -> Path | None:
    """The tokenizer model to use: ``tokenizer_path`` if given, else a known file name in ``directory``."""
    if tokenizer_path is not None:
        return Path(tokenizer_path)
    if directory is None:
        return None
    for name in TOKENIZER_FILENAMES:
        if (directory / name).is_file():
            return directory / name
    return None


def verify_checkpoint_dir(path: str | os.PathLike, tokenizer_path: str | os.PathLike | None = None) -> CheckpointReport:
    """Check a checkpoint directory file by file (seed 003: config.json, model.safetensors, norm_stats.json)
    plus the SentencePiece tokenizer, naming each missing file and where to get it.

    Args:
        path: checkpoint directory.
        tokenizer_path: explicit tokenizer model (``--tokenizer-path``); else looked up in ``path``.

    Returns:
        a :class:`CheckpointReport`; call ``.raise_if_missing()`` to turn MISS lines into an error.
    """
    d = Path(path).expanduser()
    rep = CheckpointReport(directory=d)
    if not d.is_dir():
        hint = "not a directory: set PI05_CHECKPOINT_PATH or --model-path to the checkpoint directory"
        for n in ("config.json", "model.safetensors", "norm_stats.json", "tokenizer"):
            rep.checks.append(CheckpointFileCheck("MISS", n, None, hint))
        return rep
    cfg = d / "config.json"
    rep.checks.append(
        CheckpointFileCheck("OK", "config.json", cfg)
        if cfg.is_file()
        else CheckpointFileCheck(
            "MISS",
            "config.json",
            None,
            "ships with the checkpoint (lerobot: `hf download lerobot/pi05_libero_base`; openpi: written by "
            "examples/convert_jax_model_to_pytorch.py); for a bare RLinf safetensors dump write "
            '{"paligemma_variant": "gemma_2b", "action_expert_variant": "gemma_300m"}',
        )
    )
    shards = safetensors_files(d)
    if shards:
        rep.checks.append(CheckpointFileCheck("OK", "model.safetensors", shards[0]))
    else:
        fsdp = [p for p in ("model_state_dict/full_weights.pt", "actor/model_state_dict/full_weights.pt") if (d / p).is_file()]
        hint = (
            f"found RLinf FSDP dump {fsdp[0]}: export it to safetensors (openpi key names) first; torch pickles are never loaded"
            if fsdp
            else "download the weights (lerobot/pi05_libero_base, or RLinf-Pi05-LIBERO-130-fullshot-SFT with --exclude optimizer.pt)"
        )
        rep.checks.append(CheckpointFileCheck("MISS", "model.safetensors", None, hint))
    ns = d / "norm_stats.json"
    if ns.is_file():
        rep.checks.append(CheckpointFileCheck("OK", "norm_stats.json", ns))
    else:
        found = [sub for sub in NORM_STATS_SUBPATHS if (d / sub).is_file()]
        hint = (
            f"found {found[0]}: copy it to {ns}"
            if found
            else "download openpi's pi05_libero/assets/physical-intelligence/libero/norm_stats.json to the checkpoint root "
            "(lerobot/pi05_libero_base lost its stats)"
        )
        rep.checks.append(CheckpointFileCheck("MISS", "norm_stats.json", None, hint))
    tok = find_tokenizer(d, tokenizer_path)
    if tok is not None and tok.is_file():
        rep.checks.append(CheckpointFileCheck("OK", "tokenizer", tok))
    else:
        where = f"--tokenizer-path {tok} does not exist" if tok is not None else "not in the checkpoint directory"
        rep.checks.append(
            CheckpointFileCheck(
                "MISS",
                "tokenizer",
                None,
                f"{where}: get the PaliGemma SentencePiece model paligemma_tokenizer.model (257,152 entries, sha256 "
                f"{PALIGEMMA_TOKENIZER_SHA256[:12]}..., openpi fetches gs://big_vision/paligemma_tokenizer.model) and "
                "put it in the checkpoint directory or pass --tokenizer-path",
            )
        )
    return rep


# --------------------------------------------------------------------------- config.json


def read_checkpoint_config(directory: str | os.PathLike) -> dict:
    """Parse ``config.json``. Raises CheckpointError naming the file on bad JSON or a non-pi05 ``type``."""
    p = Path(directory) / "config.json"
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {p}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{p} must hold a JSON object")
    if data.get("type", "pi05") != "pi05":
        raise CheckpointError(f"{p} says type={data.get('type')!r}; only Pi0.5 (pi05) checkpoints are supported")
    return data


def config_from_checkpoint(directory: str | os.PathLike, **overrides) -> Pi05Config:
    """Model dimensions for a checkpoint, from the variant names in its ``config.json``.

    Both openpi's and lerobot's ``config.json`` name ``paligemma_variant`` / ``action_expert_variant``
    (default gemma_2b / gemma_300m). ``overrides`` (e.g. ``action_horizon``, ``num_flow_steps``) win.
    """
    data = read_checkpoint_config(directory)
    return Pi05Config.from_variants(
        data.get("paligemma_variant", "gemma_2b"), data.get("action_expert_variant", "gemma_300m"), **overrides
    )


# --------------------------------------------------------------------------- tensors


def detect_layout(keys) -> str:
    """"lerobot" when the keys carry the ``model.`` prefix, else "openpi"."""
    return "lerobot" if any(k.startswith("model.paligemma_with_expert.") for k in keys) else "openpi"


def _canonical(key: str, layout: str) -> str:
    prefix = LAYOUT_PREFIX[layout]
    if prefix and key.startswith(prefix):
        key = key[len(prefix):]
    for old, new in LEGACY_RENAMES.items():
        if key.startswith(old):
            key = new + key[len(old):]
    return key


def _summarise(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def load_checkpoint_tensors(
    directory: str | os.PathLike,
    cfg: Pi05Config,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    fp8: bool = False,
) -> tuple[dict[str, torch.Tensor], str]:
    """Read every model tensor from the checkpoint's safetensors file(s).

    Args:
        directory: checkpoint directory (``model.safetensors`` or ``*.safetensors`` shards); an FP8
            checkpoint (``config.json`` ``quantization``, :mod:`rpent.models.pi05.fp8`) also stores
            ``<key>_scale`` float32 [N] next to each FP8 projection weight.
        cfg: dimensions the tensors must have (from :func:`config_from_checkpoint`).
        device: where the tensors go (safetensors reads straight to it).
        dtype: floating dtype to cast to (bf16 on CUDA, float32 on CPU).
        fp8: return the Gemma projection weights in FP8 with their ``*_scale`` entries (read as they are
            from an FP8 checkpoint, quantised on ``device`` from any other); False: every floating tensor
            in ``dtype`` (an FP8 checkpoint's weights dequantised on ``device``).

    Returns:
        (tensors keyed by openpi names without prefix, detected layout "openpi"|"lerobot").

    Raises:
        CheckpointError: no safetensors file; a truncated or garbage safetensors file
            (:class:`DamagedWeightsError`: the message names the file and the fix); any expected tensor
            missing; any unexpected tensor; any shape mismatch; an unknown quantisation format. The
            message lists the offending keys.
    """
    from safetensors import safe_open

    from rpent.models.pi05 import fp8 as fp8mod
    from rpent.models.weights import REFETCH, WeightsFileError, check_safetensors

    d = Path(directory)
    try:
        stored_fp8 = (d / "config.json").is_file() and fp8mod.is_fp8_checkpoint(read_checkpoint_config(d))
    except ValueError as exc:
        raise CheckpointError(f"{d / 'config.json'}: {exc}") from None
    files = safetensors_files(d)
    if not files:
        raise CheckpointError(f"no *.safetensors in {d}; see verify_checkpoint_dir() for where to get the weights")
    handles = []
    where: dict[str, tuple[int, str]] = {}
    for i, f in enumerate(files):
        try:
            check_safetensors(f, fix=f"{REFETCH} (the Pi0.5 checkpoint in {d} is damaged)")
            h = safe_open(str(f), framework="pt", device=str(device))
        except WeightsFileError as exc:
            raise DamagedWeightsError(str(exc)) from None
        handles.append(h)
        for k in h.keys():
            where[k] = (i, k)
    layout = detect_layout(where)
    canon: dict[str, tuple[int, str]] = {}
    for raw, loc in where.items():
        canon[_canonical(raw, layout)] = loc
    expected = expected_tensor_shapes(cfg)
    if stored_fp8:
        for k in fp8mod.quantized_keys(cfg):
            expected[k + fp8mod.SCALE_SUFFIX] = expected[k][:1]
    emb = LANG + "embed_tokens.weight"
    if emb not in canon and PALI + "lm_head.weight" in canon:
        canon[emb] = canon[PALI + "lm_head.weight"]  # tied embedding stored only as lm_head
    missing = [k for k in expected if k not in canon]
    unexpected = sorted(k for k in canon if k not in expected and k not in OPTIONAL_UNUSED_KEYS)
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing tensor(s): {_summarise(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensor(s): {_summarise(unexpected)}")
    mismatched = []
    for k, shape in expected.items():
        if k in canon:
            i, raw = canon[k]
            found = tuple(handles[i].get_slice(raw).get_shape())
            if found != shape:
                mismatched.append(f"{k} {list(found)} (expected {list(shape)})")
    if mismatched:
        problems.append(
            f"{len(mismatched)} shape mismatch(es): {_summarise(mismatched, 6)}; config.json names "
            f"paligemma_variant={cfg.paligemma_variant!r}, action_expert_variant={cfg.action_expert_variant!r}: "
            "fix the variants to match the weights"
        )
    if problems:
        raise CheckpointError(
            f"checkpoint {d} ({layout} layout) does not match the Pi0.5 model; refusing to run with random weights: "
            + "; ".join(problems)
        )
    threads = LOAD_THREADS if torch.device(device).type == "cuda" else 1
    tensors = read_tensors(files, [(k, *canon[k]) for k in expected], device, dtype, threads)
    if stored_fp8 and not fp8:
        tensors = fp8mod.dequantize_tensors(tensors, cfg, dtype)
    elif fp8 and not stored_fp8:
        tensors = fp8mod.quantize_tensors(tensors, cfg)
    return tensors, layout


#: Reader threads for a checkpoint load to CUDA: each reads its share of the tensors through its own
#: safetensors handle, so page faults / disk reads overlap (the copies release the GIL).
LOAD_THREADS = int(os.environ.get("RPENT_PI05_LOAD_THREADS", "8"))


def read_tensors(files: list[Path], items: list[tuple[str, int, str]], device, dtype: torch.dtype,
                 threads: int = 1) -> dict[str, torch.Tensor]:
    """Read ``items`` (name, index into ``files``, key in that file) to ``device``, floating tensors cast
    to ``dtype`` except FP8 values and their ``*_scale`` float32 entries (kept as stored); returns
    {name: tensor} in ``items`` order. With ``threads`` > 1 the tensors are read in that many threads,
    each with its own safetensors handle (largest tensors dealt out round-robin so the threads get
    similar byte counts)."""
    from safetensors import safe_open

    from rpent.models.pi05.fp8 import FP8_DTYPE, SCALE_SUFFIX

    def work(chunk):
        handles, res = {}, {}
        for name, i, raw in chunk:
            if i not in handles:
                handles[i] = safe_open(str(files[i]), framework="pt", device=str(device))
            t = handles[i].get_tensor(raw)
            keep = t.dtype == FP8_DTYPE or name.endswith(SCALE_SUFFIX)
            res[name] = t.to(dtype=dtype) if t.is_floating_point() and not keep else t
        return res

    n = threads
    if n <= 1 or len(items) < 2:
        return work(items)
    sizes = {}
    for f_i, f in enumerate(files):
        with safe_open(str(f), framework="pt") as h:
            for name, i, raw in items:
                if i == f_i:
                    shape = h.get_slice(raw).get_shape()
                    sizes[name] = int(torch.Size(shape).numel())
    order = sorted(items, key=lambda it: -sizes.get(it[0], 0))
    chunks = [order[j::n] for j in range(n)]
    from concurrent.futures import ThreadPoolExecutor

    out: dict[str, torch.Tensor] = {}
    with ThreadPoolExecutor(n, thread_name_prefix="ckpt-read") as pool:
        for part in pool.map(work, chunks):
            out.update(part)
    return {name: out[name] for name, _, _ in items}


def save_checkpoint_tensors(tensors: dict[str, torch.Tensor], directory: str | os.PathLike, layout: str = "openpi") -> Path:
    """Write ``tensors`` (openpi names) to ``<directory>/model.safetensors`` in ``layout``, atomically.

    Raises:
        ValueError: unknown layout.
    """
    from safetensors.torch import save_file

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    prefix = LAYOUT_PREFIX[layout]
    data = {prefix + k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    target = d / "model.safetensors"
    fd, tmp = tempfile.mkstemp(prefix=".model.", suffix=".safetensors.partial", dir=d)
    os.close(fd)
    try:
        save_file(data, tmp, metadata={"format": "pt"})
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def random_tensors(cfg: Pi05Config, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights with the checkpoint schema (for ``--random-weights`` benchmarks and tiny checkpoints).

    Linear weights ~ N(0, 1/fan_in) so activations stay O(1); norm weights ~ N(0, 0.1) (the (1+w)
    convention makes 0 the identity); adaRMS projections ~ N(0, 0.02/sqrt(fan_in)); biases small.
    Generated on ``device`` with a seeded generator (deterministic per device type).
    """
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(seed)
    out: dict[str, torch.Tensor] = {}
    for k, shape in expected_tensor_shapes(cfg).items():
        if len(shape) == 1:
            std = 0.1 if ("norm" in k and "dense" not in k) else 0.02
        elif "embed_tokens" in k:
            std = shape[1] ** -0.5  # times sqrt(width) in the prefix -> unit-scale text tokens
        elif "position_embedding" in k:
            std = 0.02
        else:
            fan_in = 1
            for n in shape[1:]:
                fan_in *= n
            std = (0.02 if "dense" in k else 1.0) / fan_in ** 0.5
        if re.search(r"layer_norm\d\.weight|post_layernorm\.weight", k):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g, device=dev)  # LayerNorm: plain scale around 1
        else:
            t = std * torch.randn(shape, generator=g, device=dev)
        out[k] = t.to(dtype)
    return out
