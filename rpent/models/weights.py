"""Checks of weight files before a loader touches them: a truncated or garbage file becomes one
named error (the file, what is wrong with it, how to fix it), never a raw traceback.

Used by every model loader of rpent: the Pi0.5 checkpoint reader
(:func:`rpent.models.pi05.checkpoint.load_checkpoint_tensors`), the APXInf adapter
(:meth:`rpent.models.pi05.apxinf.ApxInfPolicy.create`) and the SAM3 server
(:mod:`rpent.robots.components.sam3_server`). Their command-line servers print the message
and exit 2.

Formats: safetensors (``huggingface/safetensors`` format: 8-byte little-endian header length,
a JSON header whose ``data_offsets`` must cover the rest of the file exactly) is checked by
opening it with the ``safetensors`` library itself (header only, no tensor is read); a PyTorch
``.pt`` file written by ``torch.save`` since PyTorch 1.6 is a zip archive, whose central
directory (at the end of the file) is missing when the file is truncated.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

#: The usual fix for a damaged weight file.
REFETCH = "copy or download the file again (compare its size with the source's) and retry"


class WeightsFileError(ValueError):
    """A weight file that cannot be loaded. ``str()`` is one line: file, problem, fix.

    Attributes:
        path: the file. problem: what is wrong. fix: what to do.
    """

    def __init__(self, path: str | os.PathLike, problem: str, fix: str = REFETCH):
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        super().__init__(f"weight file {self.path} cannot be loaded: {problem}; {fix}")


def check_safetensors(path: str | os.PathLike, fix: str = REFETCH) -> list[str]:
    """Open ``path`` as safetensors (header only) and return its tensor names.

    Raises:
        WeightsFileError: missing, empty, truncated, or not safetensors at all (the
            library's own diagnosis is quoted).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise WeightsFileError(p, f"cannot be read ({exc.strerror or exc})", fix) from None
    if size < 8:
        raise WeightsFileError(p, f"it is {size} bytes long, too short to be safetensors (empty or truncated)", fix)
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(p), framework="numpy") as handle:
            return list(handle.keys())
    except (SafetensorError, OSError, ValueError) as exc:
        raise WeightsFileError(
            p, f"truncated or not a safetensors file ({size} bytes; safetensors says: {exc})", fix) from None


def check_torch_archive(path: str | os.PathLike, fix: str = REFETCH) -> None:
    """Check that a ``torch.save`` file (``.pt``/``.pth``) is complete, without unpickling it.

    A zip archive must have its central directory and every member's header; a file that is
    not a zip (pre-1.6 PyTorch format) is left to the loader.

    Raises:
        WeightsFileError: missing, empty, or a truncated/damaged archive.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise WeightsFileError(p, f"cannot be read ({exc.strerror or exc})", fix) from None
    if size == 0:
        raise WeightsFileError(p, "the file is empty", fix)
    if head[:2] != b"PK":
        return
    try:
        with zipfile.ZipFile(p) as z:
            for info in z.infolist():
                if info.header_offset + info.compress_size > size:
                    raise zipfile.BadZipFile(f"member {info.filename} runs past the end of the file")
    except zipfile.BadZipFile as exc:
        raise WeightsFileError(p, f"truncated or damaged torch archive ({size} bytes; {exc})", fix) from None
