"""Fixtures of the TUI tests (helpers live in ``tui_helpers``)."""

import pytest


@pytest.fixture
def png_bytes() -> bytes:
    """A real 32x32 RGB PNG (a gradient)."""
    import io

    import numpy as np
    from PIL import Image

    arr = np.zeros((32, 32, 3), np.uint8)
    arr[..., 0] = np.arange(32)[None, :] * 8
    arr[..., 1] = np.arange(32)[:, None] * 8
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()
