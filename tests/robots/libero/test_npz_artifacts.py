"""Step ``.npz`` artifacts: written at the fast deflate level, read back exactly by ``np.load`` without pickles."""

from __future__ import annotations

import io
import zipfile

import numpy as np

from rpent.robots.libero.toolkit.observation import NPZ_LEVEL, load_npz, npz_bytes


def test_npz_bytes_round_trip_and_compression(tmp_path):
    rng = np.random.default_rng(0)
    world = np.tile(np.linspace(-0.5, 0.5, 256, dtype=np.float32)[None, :, None], (256, 1, 3))
    world[..., 2] += rng.normal(0, 1e-3, (256, 256)).astype(np.float32)
    ids = np.zeros((256, 256), np.int32)
    ids[100:120, 30:90] = 7
    data = npz_bytes(xyz=world, ids=ids)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert sorted(zf.namelist()) == ["ids.npy", "xyz.npy"]
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    assert len(data) < world.nbytes // 2 + ids.nbytes // 10  # still compressed
    path = tmp_path / "a.npz"
    path.write_bytes(data)
    assert np.array_equal(load_npz(path, "xyz"), world) and load_npz(path, "xyz").dtype == np.float32
    assert np.array_equal(load_npz(path, "ids"), ids)
    assert NPZ_LEVEL == 1
