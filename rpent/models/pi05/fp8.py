"""FP8 (E4M3) weights for the Gemma prefix and the action expert: quantisation, the FP8 linear layer,
the device check, and FP8 checkpoints on disk.

**Format.** Each linear weight W [N, K] of the Gemma-2B prefix and of the Gemma-300M action expert
(q/k/v/o projections, gate/up/down projections: 7 per layer, 252 in all) is stored as
``float8_e4m3fn`` values Q [N, K] with one float32 scale per output channel s [N]:
``W ~= Q * s[:, None]``, ``s = max(|W[n, :]|) / 448`` (448 = the largest finite E4M3 value), so every row
uses the whole E4M3 range. Everything else (SigLIP, the token embedding, norms, the adaRMS and
action/time projections) keeps the model dtype. Per-channel E4M3 keeps 3 mantissa bits per weight: a
relative rounding error of at most 2^-4 per value, unbiased over a row.

**Matmuls** (CUDA only; :mod:`rpent.models.pi05.fused` dispatches):

* few rows (the action expert: M = B*H <= 32 tokens) - weight-only FP8: a Triton kernel streams Q,
  converts it to bf16 in registers and multiplies with the bf16 activations, the scale applied per
  output column (the weight read is the whole cost there, and it halves);
* many rows (the prefix: ~530 tokens per sample) - ``torch._scaled_mm`` on the FP8 tensor cores with
  the activations quantised per row (token) to E4M3 by one Triton kernel (row scale ``max|x| / 448``).

FP8 tensor cores exist from compute capability 8.9 (Ada, Hopper: H100/H200) on; elsewhere
:func:`check_fp8_device` raises :class:`Fp8NotSupportedError` (``--precision fp8`` is refused by name).
On the CPU the same functions run an emulation (dequantised weights, fake-quantised activations) that
tests use to check the conversion; the server never serves FP8 on the CPU.

**Checkpoints.** :func:`convert_checkpoint` writes an FP8 checkpoint directory: the openpi-layout
``model.safetensors`` with the quantised weights as ``F8_E4M3`` tensors under their usual names plus
``<name>_scale`` (float32 [N]) next to each, the other tensors in bf16; ``config.json`` gains
``"quantization": {"format": "rpent-fp8-e4m3-per-channel", ...}``; ``norm_stats.json`` and the tokenizer
are copied. :func:`rpent.models.pi05.checkpoint.load_checkpoint_tensors` reads such a directory
(FP8 weights kept as they are for ``--precision fp8``, dequantised once on the device for bf16).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

from rpent.models.pi05.settings import PRECISIONS  # noqa: F401 - re-exported: the precisions besides "auto"

FP8_DTYPE = torch.float8_e4m3fn
#: Largest finite ``float8_e4m3fn`` value (``torch.finfo(torch.float8_e4m3fn).max``).
E4M3_MAX = 448.0
#: ``config.json`` "quantization.format" of an FP8 checkpoint written by :func:`convert_checkpoint`.
FP8_FORMAT = "rpent-fp8-e4m3-per-channel"
#: Suffix of the per-channel scale tensor stored next to each quantised weight.
SCALE_SUFFIX = "_scale"
#: Projection names (openpi checkpoint keys below ``layers.<i>.``) that are stored in FP8.
QUANTIZED_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
#: Lowest CUDA compute capability with FP8 tensor cores (Ada Lovelace sm_89; Hopper sm_90).
MIN_CAPABILITY = (8, 9)


class Fp8NotSupportedError(RuntimeError):
    """``--precision fp8`` on a device without FP8 tensor cores (the message names the device and the fix)."""


def check_fp8_device(device: torch.device | str) -> None:
    """Refuse FP8 where the matmuls cannot run: not CUDA, a GPU below compute capability 8.9, or a
    torch without ``torch._scaled_mm``.

    Raises:
        Fp8NotSupportedError: naming the device, its capability and the fix (``--precision bf16``).
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        raise Fp8NotSupportedError(
            f"--precision fp8 needs a CUDA GPU with FP8 tensor cores (compute capability >= 8.9: Ada, H100, H200); "
            f"the model is on {dev}: use --precision bf16 (float32 on the CPU)")
    cap = torch.cuda.get_device_capability(dev)
    if tuple(cap) < MIN_CAPABILITY or not hasattr(torch, "_scaled_mm"):
        name = torch.cuda.get_device_name(dev)
        raise Fp8NotSupportedError(
            f"--precision fp8 needs FP8 tensor cores (compute capability >= {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}: "
            f"Ada, H100, H200); {dev} is a {name} (sm_{cap[0]}{cap[1]}): use --precision bf16")


def quantize_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """W [N, K] (any float dtype) -> (Q float8_e4m3fn [N, K], scale float32 [N]) with ``W ~= Q * scale[:, None]``.

    ``scale = max_k |W[n, k]| / 448``; an all-zero row gets scale 1 (its Q is zero). Computed in float32
    on W's device.
    """
    if w.ndim != 2:
        raise ValueError(f"per-channel quantisation needs a [N, K] weight, got {list(w.shape)}")
    wf = w.float()
    amax = wf.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (wf / scale[:, None]).clamp_(-E4M3_MAX, E4M3_MAX).to(FP8_DTYPE)
    return q, scale.contiguous()


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Q [N, K] float8_e4m3fn, scale [N] -> W [N, K] in ``dtype`` (product in float32, rounded once)."""
    return (q.float() * scale.float()[:, None]).to(dtype)


def quantize_rows_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations x [M, K] -> (Q float8_e4m3fn [M, K], scale float32 [M, 1]) per row (token): the
    reference of the Triton ``quant_rows_kernel`` (``scale = max(max|x|, 1e-12) / 448``)."""
    xf = x.float()
    amax = xf.abs().amax(dim=1, keepdim=True).clamp_min(1e-12)
    scale = amax / torch.full_like(amax, E4M3_MAX)  # tensor / tensor: IEEE division on CUDA too
    return (xf / scale).clamp_(-E4M3_MAX, E4M3_MAX).to(FP8_DTYPE), scale


def cat_fp8(parts: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate FP8 tensors along dim 0 (through uint8 views: concatenation is a byte copy)."""
    return torch.cat([p.contiguous().view(torch.uint8) for p in parts], 0).view(FP8_DTYPE)


class Fp8Linear(nn.Module):
    """A bias-free linear layer with an FP8 weight: buffers ``qweight`` float8_e4m3fn [N, K] and ``scale``
    float32 [N]. ``forward(x [.., K]) -> [.., N]`` in x's dtype (:func:`rpent.models.pi05.fused.linear`).

    Built on the meta device by the model and filled by ``load_state_dict(assign=True)``, or with
    :meth:`from_weight` from a float weight.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("qweight", torch.empty(out_features, in_features, dtype=FP8_DTYPE))
        self.register_buffer("scale", torch.empty(out_features, dtype=torch.float32))
        self._rows: dict[int, Fp8Linear] = {}

    @classmethod
    def from_weight(cls, w: torch.Tensor) -> "Fp8Linear":
        """Quantise a float weight [N, K] (:func:`quantize_per_channel`) on its device."""
        q, s = quantize_per_channel(w)
        with torch.device("meta"):
            mod = cls(w.shape[1], w.shape[0])
        mod.qweight, mod.scale = q, s
        return mod

    @property
    def shape(self) -> tuple[int, int]:
        """(N, K) like a weight tensor's shape."""
        return (self.out_features, self.in_features)

    def rows(self, start: int) -> "Fp8Linear":
        """The layer restricted to output rows [start, N) (views of the buffers; cached)."""
        if start not in self._rows:
            with torch.device("meta"):
                sub = Fp8Linear(self.in_features, self.out_features - start)
            sub.qweight, sub.scale = self.qweight[start:], self.scale[start:]
            self._rows[start] = sub
        return self._rows[start]

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight W ~= Q * scale [N, K] in ``dtype``."""
        return dequantize(self.qweight, self.scale, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from rpent.models.pi05 import fused

        return fused.linear(x, self)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, float8_e4m3fn per-channel"


# --------------------------------------------------------------------------- checkpoints


def quantized_keys(cfg) -> list[str]:
    """Checkpoint keys (openpi layout, no prefix) of the weights an FP8 checkpoint stores in E4M3."""
    from rpent.models.pi05.checkpoint import EXPERT, LANG

    keys = []
    for prefix, depth in ((LANG, cfg.backbone.depth), (EXPERT + "model.", cfg.expert.depth)):
        for i in range(depth):
            keys += [f"{prefix}layers.{i}.{p}.weight" for p in QUANTIZED_PROJECTIONS]
    return keys


def is_fp8_checkpoint(config: dict) -> bool:
    """Whether a parsed ``config.json`` declares this module's FP8 format.

    Raises:
        ValueError: it declares another quantisation format (named in the message).
    """
    q = config.get("quantization")
    if q is None:
        return False
    fmt = q.get("format") if isinstance(q, dict) else q
    if fmt != FP8_FORMAT:
        raise ValueError(f"config.json declares quantization format {fmt!r}; this loader reads {FP8_FORMAT!r} "
                         "(rpent.models.pi05.fp8.convert_checkpoint) or unquantised checkpoints")
    return True


def quantize_tensors(tensors: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """Replace each weight of :func:`quantized_keys` in ``tensors`` (openpi names) by its FP8 values and
    add ``<key>_scale``; other tensors are left as they are. Returns a new dict (same tensor objects)."""
    out = dict(tensors)
    for k in quantized_keys(cfg):
        q, s = quantize_per_channel(out[k])
        out[k] = q
        out[k + SCALE_SUFFIX] = s
    return out


def dequantize_tensors(tensors: dict[str, torch.Tensor], cfg, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The inverse for serving an FP8 checkpoint in ``dtype``: each quantised weight becomes
    ``Q * scale`` in ``dtype`` and its scale entry is dropped."""
    out = dict(tensors)
    for k in quantized_keys(cfg):
        out[k] = dequantize(out[k], out.pop(k + SCALE_SUFFIX), dtype)
    return out


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, *, device: str | None = None,
                       log=print) -> Path:
    """Write an FP8 copy of the checkpoint directory ``src`` to ``dst`` (see the module docstring).

    The weights are read in bf16 (checked like any load: every tensor present, shapes right),
    quantised on ``device`` (default: cuda:0 when available, else the CPU) and written in the openpi
    layout to a temporary file renamed to ``dst/model.safetensors`` at the end, so an interrupted
    conversion leaves no file that looks whole. ``dst`` must not hold a ``model.safetensors`` yet.

    Returns:
        ``dst``.

    Raises:
        CheckpointError: ``src`` is not a complete Pi0.5 checkpoint; FileExistsError: ``dst`` already holds weights.
    """
    from rpent.models.pi05.checkpoint import (
        find_tokenizer,
        load_checkpoint_tensors,
        read_checkpoint_config,
        save_checkpoint_tensors,
        verify_checkpoint_dir,
        config_from_checkpoint,
    )

    src, dst = Path(src), Path(dst)
    report = verify_checkpoint_dir(src)
    report.raise_if_missing()
    if (dst / "model.safetensors").exists():
        raise FileExistsError(f"{dst / 'model.safetensors'} exists; convert into an empty directory")
    conf = read_checkpoint_config(src)
    if is_fp8_checkpoint(conf):
        raise ValueError(f"{src} is already an FP8 checkpoint ({FP8_FORMAT})")
    cfg = config_from_checkpoint(src)
    dev = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    tensors, layout = load_checkpoint_tensors(src, cfg, dev, torch.bfloat16)
    q = quantize_tensors(tensors, cfg)
    del tensors
    dst.mkdir(parents=True, exist_ok=True)
    save_checkpoint_tensors(q, dst, "openpi")
    conf = dict(conf)
    conf["quantization"] = {
        "format": FP8_FORMAT, "dtype": "float8_e4m3fn", "scales": "float32 per output channel, <key>" + SCALE_SUFFIX,
        "layers": "gemma prefix and action expert q/k/v/o/gate/up/down projections", "source": str(src),
        "source_layout": layout,
    }
    _write_json_atomic(dst / "config.json", conf)
    shutil.copyfile(report.get("norm_stats.json").path, dst / "norm_stats.json")
    tok = find_tokenizer(src, None)
    if tok is not None and tok.is_file():
        shutil.copyfile(tok, dst / tok.name)
    n_bytes = sum(t.numel() * t.element_size() for t in q.values())
    log(f"wrote {dst} ({n_bytes / 1e9:.2f} GB of tensors, {len(quantized_keys(cfg))} FP8 weights)")
    return dst


def _write_json_atomic(path: Path, doc: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix="." + path.name, suffix=".partial", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    """``python -m rpent.models.pi05.fp8 SRC DST``: write an FP8 copy of a Pi0.5 checkpoint."""
    import argparse
    import sys

    from rpent.models.pi05.checkpoint import CheckpointError

    ap = argparse.ArgumentParser(prog="python -m rpent.models.pi05.fp8",
                                 description="Write an FP8 (E4M3, per-channel scales) copy of a Pi0.5 checkpoint directory.")
    ap.add_argument("src", help="checkpoint directory (openpi or lerobot layout, bf16/float32 weights)")
    ap.add_argument("dst", help="new directory for the FP8 checkpoint (must not hold model.safetensors)")
    ap.add_argument("--device", default=None, help="where to quantise (default: cuda:0 if available, else cpu)")
    args = ap.parse_args(argv)
    try:
        convert_checkpoint(args.src, args.dst, device=args.device)
    except (CheckpointError, FileExistsError, ValueError) as exc:
        print(f"fp8 convert: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
