"""SAM3 segmentation server: Meta's SAM 3 behind the rpent RPC layer (text or point prompts).

Usage (seed 000, "SAM3 服务")::

    export SAM3_CHECKPOINT_PATH=/path/to/sam3/sam3.pt
    python -m rpent.robots.components.sam3_server --cuda-device 0 --transport http --host 127.0.0.1 --port 8230
    rpent ... --sam3-endpoint http://127.0.0.1:8230

Methods:

* ``sam3.segment(image, text_prompt=None, point=None, min_score=0.2)``: ``image`` uint8 [H, W, 3] RGB;
  exactly one of ``text_prompt`` (str, e.g. "alphabet soup") or ``point`` ([row, col] pixel, a foreground
  click). Only the top-scoring candidate is kept. Returns
  ``{found: True, score, box: [x0, y0, x1, y1] (px, inclusive tight box of the mask), mask_bits: uint8
  np.packbits of the bool mask flattened row-major, mask_shape: [H, W]}`` or ``{found: False, reason}``
  with reason "SAM3 returned no candidate", "top score S below min_score M" (with ``score``) or
  "empty mask". Decode with ``np.unpackbits(mask_bits)[:H*W].reshape(H, W).astype(bool)`` (the
  toolkit's ``segment`` tool does, ``rpent/robots/libero/toolkit/perception.py``).
* ``sam3.metadata()`` -> {checkpoint, device, predictor}.

Bad requests raise ValueError naming the field (e.g. "segment needs exactly one of prompt or point").

Start-up errors exit 2 before binding: no checkpoint ("SAM3 checkpoint not found: ... set
SAM3_CHECKPOINT_PATH"), a truncated or damaged checkpoint ("weight file ... cannot be loaded: truncated
or damaged torch archive ...; copy or download the file again", checked without unpickling, see
:mod:`rpent.models.weights`), no CUDA device ("local SAM3 requires a CUDA-capable GPU"), ``sam3`` not
installed.

Predictor factory (documented hook, used by the tests with a stand-in): ``--predictor-factory
module:function``; the function is called as ``factory(checkpoint=Path, device="cuda:N", bpe_path=str|None)``
and returns an object with ``segment_text(image, prompt)`` and ``segment_point(image, (row, col))``, each
returning ``(scores float [N], masks bool [N, H, W])`` for the N candidates. The default,
:func:`meta_sam3_predictor`, uses the ``sam3`` package (``build_sam3_image_model`` + ``Sam3Processor``
for text, the SAM-1-task ``predict_inst`` head for points).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from pathlib import Path

import numpy as np

from rpent.models.weights import REFETCH, WeightsFileError, check_safetensors, check_torch_archive
from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args

CHECKPOINT_ENV = "SAM3_CHECKPOINT_PATH"
DEFAULT_FACTORY = "rpent.robots.components.sam3_server:meta_sam3_predictor"
#: Candidates below this are dropped inside SAM3's processor (its own default is 0.5); ours is ``min_score``.
SAM3_CANDIDATE_FLOOR = 0.01
NO_CANDIDATE = "SAM3 returned no candidate"
EMPTY_MASK = "empty mask"


class Sam3StartupError(RuntimeError):
    """The SAM3 model cannot be started here (no GPU, package missing); the message says what to do."""


def _log(msg: str) -> None:
    print(f"sam3_server: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- request logic


def encode_mask(mask: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """bool [H, W] -> (uint8 ``np.packbits`` of the row-major flattened mask, [H, W])."""
    m = np.asarray(mask, dtype=bool)
    return np.packbits(m.reshape(-1)), [int(m.shape[0]), int(m.shape[1])]


def mask_box(mask: np.ndarray) -> list[int]:
    """Tight inclusive box [x0, y0, x1, y1] in pixels (x = column, y = row) of a non-empty bool mask."""
    rows, cols = np.nonzero(mask)
    return [int(cols.min()), int(rows.min()), int(cols.max()), int(rows.max())]


def top_candidate(scores, masks, min_score: float, image_hw: tuple[int, int]) -> dict:
    """Keep the top-scoring candidate and encode the reply (see the module docstring).

    Args:
        scores: float [N] candidate scores in [0, 1].
        masks: bool [N, H, W] candidate masks at the image resolution.
        min_score: the caller's threshold.
        image_hw: (H, W) of the request image.

    Raises:
        RuntimeError: the predictor returned inconsistent shapes (a predictor bug, not a request error).
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    m = np.asarray(masks)
    if s.size == 0:
        return {"found": False, "reason": NO_CANDIDATE}
    if m.ndim != 3 or m.shape[0] != s.size or tuple(m.shape[1:]) != tuple(image_hw):
        raise RuntimeError(f"SAM3 predictor returned masks {list(m.shape)} for {s.size} scores and a {list(image_hw)} image")
    i = int(np.argmax(s))
    score = float(s[i])
    if score < min_score:
        return {"found": False, "reason": f"top score {score:.3f} below min_score {min_score:.3f}", "score": score}
    mask = m[i].astype(bool)
    if not mask.any():
        return {"found": False, "reason": EMPTY_MASK, "score": score}
    bits, shape = encode_mask(mask)
    return {"found": True, "score": score, "box": mask_box(mask), "mask_bits": bits, "mask_shape": shape}


def check_request(image, text_prompt, point, min_score) -> tuple[np.ndarray, tuple[int, int] | None, float]:
    """Validate a ``sam3.segment`` request.

    Returns:
        (image uint8 [H, W, 3] C-contiguous, point (row, col) or None, min_score float).

    Raises:
        ValueError: naming the field and the expected form.
    """
    if (text_prompt is None) == (point is None):
        raise ValueError("segment needs exactly one of prompt or point")
    img = image if isinstance(image, np.ndarray) else None
    if img is None or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3 or min(img.shape[:2]) < 1:
        raise ValueError(f"image must be a uint8 [H, W, 3] RGB array, got "
                         f"{getattr(image, 'dtype', type(image).__name__)} {list(getattr(image, 'shape', ()))}")
    if text_prompt is not None and (not isinstance(text_prompt, str) or not text_prompt.strip()):
        raise ValueError("text_prompt must be a non-empty str, e.g. 'alphabet soup'")
    pt = None
    if point is not None:
        p = list(point) if isinstance(point, (list, tuple, np.ndarray)) else None
        if p is None or len(p) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in p):
            raise ValueError(f"point must be [row, col] integer pixels, got {point!r}")
        r, c = int(p[0]), int(p[1])
        h, w = img.shape[:2]
        if not (0 <= r < h and 0 <= c < w):
            raise ValueError(f"point [row={r}, col={c}] out of bounds for a {h}x{w} image")
        pt = (r, c)
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0.0 <= float(min_score) <= 1.0:
        raise ValueError(f"min_score must be a number in [0, 1], got {min_score!r}")
    return np.ascontiguousarray(img), pt, float(min_score)


class Sam3Server(RpcServer):
    """RPC server around a SAM3 predictor (see the module docstring for the predictor protocol).

    Args:
        predictor: object with ``segment_text`` / ``segment_point``.
        info: extra ``sam3.metadata`` fields (checkpoint, device, predictor name).

    Predictions run one at a time (one GPU model); validation runs on the handler threads.
    """

    def __init__(self, predictor, info: dict | None = None):
        super().__init__(name="sam3_server")
        self.predictor = predictor
        self.info = dict(info or {})
        self._gpu = threading.Lock()
        self.register("sam3.segment", self.segment, readonly=True)
        self.register("sam3.metadata", self.metadata, readonly=True)

    def segment(self, image, text_prompt: str | None = None, point=None, min_score: float = 0.2) -> dict:
        """``sam3.segment``: see the module docstring. Raises ValueError for bad requests."""
        img, pt, ms = check_request(image, text_prompt, point, min_score)
        with self._gpu:
            if pt is None:
                scores, masks = self.predictor.segment_text(img, text_prompt.strip())
            else:
                scores, masks = self.predictor.segment_point(img, pt)
        return top_candidate(scores, masks, ms, img.shape[:2])

    def metadata(self) -> dict:
        """``sam3.metadata``: checkpoint, device and predictor."""
        return dict(self.info)


# --------------------------------------------------------------------------- Meta's sam3 package


class MetaSam3Predictor:
    """SAM 3 image model from Meta's ``sam3`` package (sam3 0.1.x API).

    Text prompts: ``Sam3Processor.set_image`` then ``set_text_prompt`` (candidate masks upsampled to the
    image and thresholded at 0.5, scores = sigmoid(logit) x presence score). Point prompts: the
    SAM-1-task head (``Sam3Image.predict_inst`` with one positive click in (x, y) pixels, 3 masks).

    Args:
        checkpoint: path of ``sam3.pt``; device: ``cuda:N``; bpe_path: the CLIP BPE vocabulary
            (default: the one the ``sam3`` package ships, if it does).
    """

    def __init__(self, checkpoint: Path, device: str, bpe_path: str | None = None):
        from sam3.model.sam3_image_processor import Sam3Processor
        from sam3.model_builder import build_sam3_image_model

        self.model = build_sam3_image_model(bpe_path=bpe_path, device=device, checkpoint_path=str(checkpoint),
                                            load_from_HF=False, enable_inst_interactivity=True)
        self.processor = Sam3Processor(self.model, device=device, confidence_threshold=SAM3_CANDIDATE_FLOOR)

    def _state(self, image: np.ndarray) -> dict:
        from PIL import Image

        return self.processor.set_image(Image.fromarray(image))  # PIL: sam3 reads (H, W) from it correctly

    def segment_text(self, image: np.ndarray, prompt: str):
        """-> (scores float32 [N], masks bool [N, H, W])."""
        state = self.processor.set_text_prompt(prompt, self._state(image))
        scores = state["scores"].float().cpu().numpy().reshape(-1)
        masks = state["masks"].reshape(len(scores), *image.shape[:2]).cpu().numpy().astype(bool)
        return scores, masks

    def segment_point(self, image: np.ndarray, point: tuple[int, int]):
        """-> (scores float32 [3], masks bool [3, H, W]) for a positive click at (row, col)."""
        r, c = point
        masks, scores, _ = self.model.predict_inst(self._state(image), point_coords=np.array([[c, r]], dtype=np.float32),
                                                   point_labels=np.array([1], dtype=np.int32), multimask_output=True)
        return np.asarray(scores, dtype=np.float32).reshape(-1), np.asarray(masks).astype(bool)


def meta_sam3_predictor(checkpoint: Path, device: str, bpe_path: str | None = None) -> MetaSam3Predictor:
    """The default factory: checks for a CUDA device and the ``sam3`` package, then loads the model.

    Raises:
        Sam3StartupError: no CUDA device / ``device`` does not exist / ``sam3`` not installed.
    """
    import torch

    if not torch.cuda.is_available():
        raise Sam3StartupError("local SAM3 requires a CUDA-capable GPU (none visible to torch); run the SAM3 server on a GPU "
                               "host and pass --sam3-endpoint, or run without SAM3 (the segment tool then uses the simulator)")
    idx = torch.device(device).index or 0
    if idx >= torch.cuda.device_count():
        raise Sam3StartupError(f"--cuda-device {idx} does not exist ({torch.cuda.device_count()} CUDA device(s) visible)")
    try:
        importlib.import_module("sam3.model_builder")
    except ImportError as exc:
        raise Sam3StartupError(f"Meta's 'sam3' package is not importable ({exc}): pip install sam3 (with a CUDA build of torch)") from None
    torch.cuda.set_device(idx)
    return MetaSam3Predictor(checkpoint, device, bpe_path)


# --------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (RPC options come from :func:`rpent.rpc.cli.add_server_args`)."""
    ap = argparse.ArgumentParser(prog="python -m rpent.robots.components.sam3_server", description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=None, help=f"SAM3 checkpoint file (default ${CHECKPOINT_ENV})")
    ap.add_argument("--cuda-device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--bpe-path", default=None, help="CLIP BPE vocabulary for the text encoder (default: sam3's own)")
    ap.add_argument("--predictor-factory", default=DEFAULT_FACTORY,
                    help="module:function building the predictor (default: Meta's sam3; tests pass a stand-in)")
    add_server_args(ap)
    return ap


def _load_factory(spec: str):
    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"--predictor-factory must be 'module:function', got {spec!r}")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--predictor-factory {spec!r} cannot be loaded: {exc}") from None
    if not callable(fn):
        raise ValueError(f"--predictor-factory {spec!r} is not callable")
    return fn


def main(argv: list[str] | None = None) -> None:
    """Entry point: check the checkpoint, build the predictor, print the readiness line, serve.

    Raises:
        SystemExit(2): start-up failure (message on stderr, nothing bound).
    """
    args = build_parser().parse_args(argv)
    raw = args.checkpoint or os.environ.get(CHECKPOINT_ENV)
    if not raw or not Path(raw).is_file():
        where = raw if raw else f"(--checkpoint not given and ${CHECKPOINT_ENV} is not set)"
        _log(f"SAM3 checkpoint not found: {where}; set {CHECKPOINT_ENV} to the local sam3.pt or pass --checkpoint")
        raise SystemExit(2)
    ckpt = Path(raw)
    device = f"cuda:{args.cuda_device}"
    fix = f"{REFETCH}; {CHECKPOINT_ENV} / --checkpoint must name the SAM3 image model checkpoint (sam3.pt)"
    try:
        if ckpt.suffix == ".safetensors":
            check_safetensors(ckpt, fix)
        else:
            check_torch_archive(ckpt, fix)
    except WeightsFileError as exc:
        _log(str(exc))
        raise SystemExit(2) from None
    try:
        factory = _load_factory(args.predictor_factory)
        predictor = factory(checkpoint=ckpt, device=device, bpe_path=args.bpe_path)
    except (Sam3StartupError, ValueError) as exc:
        _log(str(exc))
        raise SystemExit(2) from None
    except Exception as exc:  # noqa: BLE001 - any load failure ends the start-up with its message
        _log(f"cannot load SAM3 from {ckpt}: {type(exc).__name__}: {exc}; {fix}")
        raise SystemExit(2) from None
    server = Sam3Server(predictor, {"checkpoint": str(ckpt), "device": device, "predictor": type(predictor).__name__})
    serve_from_args(server, args)


if __name__ == "__main__":
    main()
