"""The cell record under ``<output-dir>/code_policy/``.

Per cell ``NNN`` (1-based, three digits, continuing after cells already in the
directory, so a reused output directory never overwrites earlier cells):

* ``cell_NNN.py`` — the source, written *before* the cell runs (survives any crash);
* ``cell_NNN.json`` — the :class:`~rpent.policy.runner.CellResult` without image bytes,
  written when the cell ends; images after motion are saved next to it as
  ``cell_NNN_<k>_<label>.png`` and listed in ``image_files``.

Every file is written atomically (a temporary file in the same directory, then
``os.replace``), so a reader never sees half a file. ``worker.log`` in the same
directory collects the worker processes' own fd 1/2 output.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

_CELL_FILE = re.compile(r"^cell_(\d{3,})\.(py|json)$")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file + ``os.replace`` (atomic on POSIX)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class CellRecorder:
    """Writes the ``code_policy/`` record of one run (see the module docstring).

    Args:
        output_dir: the run's output directory; ``code_policy/`` is created inside.
    """

    def __init__(self, output_dir: str | os.PathLike):
        self.output_dir = Path(output_dir)
        self.code_dir = self.output_dir / "code_policy"
        self.code_dir.mkdir(parents=True, exist_ok=True)
        existing = [int(m.group(1)) for p in self.code_dir.iterdir() if (m := _CELL_FILE.match(p.name))]
        self._next = max(existing, default=0) + 1

    def next_index(self) -> int:
        """Reserve and return the next cell index (1-based)."""
        index, self._next = self._next, self._next + 1
        return index

    def source_path(self, index: int) -> Path:
        """``code_policy/cell_NNN.py``."""
        return self.code_dir / f"cell_{index:03d}.py"

    def result_path(self, index: int) -> Path:
        """``code_policy/cell_NNN.json``."""
        return self.code_dir / f"cell_{index:03d}.json"

    def write_source(self, index: int, source: str) -> Path:
        """Save the cell's source (UTF-8) before it runs; returns the path."""
        path = self.source_path(index)
        atomic_write_bytes(path, source.encode("utf-8"))
        return path

    def write_result(self, index: int, result: dict[str, Any]) -> Path:
        """Save the cell's result: images to PNG files, everything else to JSON.

        ``result["images"]`` (list of ``{"label", "png": bytes}``) is not stored in the
        JSON; ``image_files`` (``[{"label", "path"}]``, paths relative to the output
        dir) is added instead. Non-JSON values are written as their ``repr``.
        """
        record = {k: v for k, v in result.items() if k != "images"}
        files = []
        for k, image in enumerate(result.get("images") or []):
            label = str(image.get("label", f"image{k}"))
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60] or f"image{k}"
            path = self.code_dir / f"cell_{index:03d}_{k}_{safe}{'' if safe.endswith('.png') else '.png'}"
            atomic_write_bytes(path, bytes(image["png"]))
            files.append({"label": label, "path": str(path.relative_to(self.output_dir))})
        record["image_files"] = files
        text = json.dumps(record, indent=2, ensure_ascii=False, default=repr)
        path = self.result_path(index)
        atomic_write_bytes(path, text.encode("utf-8"))
        return path
