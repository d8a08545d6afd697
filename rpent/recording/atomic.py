"""Atomic file writes: write a sibling temporary file, flush, then ``os.replace`` it.

A reader (or a crash) therefore sees either the old complete file or the new complete
file, never a half-written one (POSIX rename is atomic within one file system).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: the process umask, read once at import (reading it means setting it; never do that while
#: other threads may be creating files)
_UMASK = _read_umask()


def write_bytes_atomic(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (tmp file in the same directory + rename).

    Args:
        path: destination; its parent directory must exist.
        data: the complete file content.
        fsync: also ``fsync`` the temporary file before the rename (survives power loss,
            costs a disk flush; not needed for process crashes).

    Raises:
        FileNotFoundError: the parent directory does not exist.
        OSError: the write or rename failed (the temporary file is removed).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json_atomic(path: Path, obj: Any, *, fsync: bool = False) -> None:
    """Write ``obj`` as indented UTF-8 JSON to ``path`` atomically (see :func:`write_bytes_atomic`).

    Raises:
        TypeError: ``obj`` is not JSON-serialisable (nothing is written).
    """
    data = (json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    write_bytes_atomic(path, data, fsync=fsync)
