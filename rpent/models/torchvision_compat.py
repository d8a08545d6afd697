"""Importing torchvision (for lerobot) next to this project's CPU torch build.

lerobot imports torchvision: its dataset code (transforms) and its ACT / Diffusion policies (ResNet
backbones, ``FrozenBatchNorm2d``). PyPI's Linux torchvision wheels are CUDA builds; beside the CPU
torch 2.13.0 their C++ extension does not load, and ``import torchvision`` then fails with
``RuntimeError: operator torchvision::nms does not exist`` when it registers fake kernels for its
ops. Defining the two op schemas first (``torchvision::nms``, ``torchvision::qnms``) lets the import
succeed: the pure-Python parts (transforms, ``torchvision.models``) work, the C++ ops (nms,
roi_align, ...) do not; lerobot's datasets and its ResNet-based policies use none of them.

The shim is applied only when the plain import fails with exactly that error.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

_shim_library: Any = None  # keeps the op definitions alive (dropping the Library deregisters them)

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor",
)


def _define_torchvision_op_schemas() -> None:
    global _shim_library
    import torch

    if _shim_library is not None:
        return
    lib = torch.library.Library("torchvision", "DEF")  # noqa: TOR901 - schema only, no kernels
    for schema in _SCHEMAS:
        lib.define(schema)
    _shim_library = lib


def import_torchvision() -> None:
    """Import torchvision, defining its two op schemas first if its C++ extension cannot load.

    Raises:
        ImportError: torchvision is not installed.
        RuntimeError: the import fails for another reason than the missing op schemas.
    """
    try:
        importlib.import_module("torchvision")
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        _define_torchvision_op_schemas()
        importlib.import_module("torchvision")
