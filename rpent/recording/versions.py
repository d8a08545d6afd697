"""Software versions written into a record's ``task.json`` (``versions`` field)."""

from __future__ import annotations

import platform
from importlib import metadata

from rpent.recording.provenance import libero_version


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def collect_versions() -> dict[str, str | None]:
    """Return ``{"rpent", "python", "mujoco", "libero"}`` version strings (``None`` = not installed).

    ``libero`` is ``"<distribution> <version>"`` so LIBERO-PRO and plain LIBERO records can be
    told apart (:func:`rpent.recording.provenance.libero_version`). Reads package metadata only;
    imports no simulator.
    """
    import rpent

    return {
        "rpent": getattr(rpent, "__version__", None) or _dist_version("rpent"),
        "python": platform.python_version(),
        "mujoco": _dist_version("mujoco"),
        "libero": libero_version(),
    }
