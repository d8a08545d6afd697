"""Importing lerobot's ``LeRobotDataset`` next to this project's CPU torch build.

lerobot (0.4.4) imports torchvision, whose PyPI (CUDA) build needs a shim beside the CPU torch:
:mod:`rpent.models.torchvision_compat`.
"""

from __future__ import annotations

from rpent.models.torchvision_compat import import_torchvision as _import_torchvision


class LeRobotUnavailableError(ImportError):
    """lerobot (or one of the packages its dataset writer needs) is not installed or not importable."""


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
