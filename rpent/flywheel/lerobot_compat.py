"""Importing lerobot's ``LeRobotDataset`` next to this project's CPU torch build.

lerobot (0.4.4) imports torchvision. PyPI's Linux torchvision wheels are CUDA builds; beside
the CPU torch 2.13.0 their C++ extension does not load, and ``import torchvision`` then fails
with ``RuntimeError: operator torchvision::nms does not exist`` when it registers fake kernels
for its ops. Defining the two op schemas first (``torchvision::nms``, ``torchvision::qnms``)
lets the import succeed: the pure-Python parts (transforms) work, the C++ ops do not, and
LeRobot datasets use none of them. Measured on lerobot 0.4.4's reader.

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


class LeRobotUnavailableError(ImportError):
    """lerobot (or one of the packages its dataset writer needs) is not installed or not importable."""


def _define_torchvision_op_schemas() -> None:
    global _shim_library
    import torch

    if _shim_library is not None:
        return
    lib = torch.library.Library("torchvision", "DEF")  # noqa: TOR901 - schema only, no kernels
    for schema in _SCHEMAS:
        lib.define(schema)
    _shim_library = lib


def _import_torchvision() -> None:
    try:
        importlib.import_module("torchvision")
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        _define_torchvision_op_schemas()
        importlib.import_module("torchvision")


def import_lerobot_dataset() -> type:
    """Return lerobot's ``LeRobotDataset`` class, applying the torchvision op-schema shim if needed.

    Raises:
        LeRobotUnavailableError: lerobot or a dependency is missing; the message gives the install
            commands (``scripts/install.sh`` route, lerobot 0.4.4 with ``--no-deps``).
    """
    try:
        _import_torchvision()
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as e:
        raise LeRobotUnavailableError(
            f"cannot import lerobot's LeRobotDataset ({e}); install the flywheel extras: "
            "pip install --no-deps lerobot==0.4.4 && pip install torchvision==0.28.0 "
            "'datasets>=4.0,<5' 'huggingface_hub>=0.34.2,<0.36' 'accelerate>=1.10,<2' "
            "'pandas>=2.2,<3' 'pyarrow>=21,<22' numpy==1.26.4"
        ) from e
    return LeRobotDataset
