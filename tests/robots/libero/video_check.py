"""Shared check: episode.mp4 is in the orientation of agentview.png."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rpent.run.record import RunRecord


def assert_video_in_agentview_orientation(run_dir: Path, record: RunRecord) -> None:
    """The last episode.mp4 frame shows the last step's agentview.png, not its left-right mirror."""
    import av
    from PIL import Image

    with av.open(str(run_dir / "episode.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    last = frames[-1].astype(np.float32)
    png = np.asarray(Image.open(record.artifact_path("agentview.png", len(record.steps) - 1)).convert("RGB"),
                     dtype=np.float32)
    assert last.shape == png.shape
    same, mirrored = np.abs(last - png).mean(), np.abs(last - png[:, ::-1]).mean()
    assert same < 6.0 and mirrored > 2 * same, (same, mirrored)
