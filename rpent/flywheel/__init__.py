"""Data flywheel: export successful runs' VLA-linked actions as a LeRobot v3.0 dataset.

``rpent-flywheel --input-root <records> --output-dir <new dir> [--image-writer-threads N]``
writes ``<new dir>/train/`` (LeRobot dataset: ``image``, ``wrist_image`` uint8 256x256x3,
``state`` float32 [8], ``actions`` float32 [7], 20 fps, robot type panda, no validation split)
and ``<new dir>/report.json``. The selection rules are in :mod:`rpent.flywheel.selection`; the
record layout in :mod:`rpent.recording`. RLinf's Pi0.5 SFT takes ``<new dir>/train`` as
``data.train_data_paths``.
"""

from rpent.flywheel.export import FlywheelError, export_records

__all__ = ["FlywheelError", "export_records"]
