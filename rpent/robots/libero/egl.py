"""Which EGL device MuJoCo renders on: derived from what is visible, checked before robosuite loads.

robosuite picks the EGL device from ``MUJOCO_EGL_DEVICE_ID``, else from ``CUDA_VISIBLE_DEVICES``
(``robosuite/renderers/context/egl_context.py``), as an index into *all* EGL devices of the host
(``eglQueryDevicesEXT``); ``robosuite/utils/binding_utils.py`` also asserts at import that
``MUJOCO_EGL_DEVICE_ID`` is one of the ``CUDA_VISIBLE_DEVICES`` entries when both are set. A
value outside the devices that exist kills the process with a long traceback
("MUJOCO_EGL_DEVICE_ID must be an integer between 0 and 0, got 1") before a server is ready.

:func:`resolve_egl_device` decides instead, from the two variables and the EGL device count:

* ``--cuda-device K`` (torch's numbering, within ``CUDA_VISIBLE_DEVICES``): the K-th visible GPU's
  index when it is an EGL device, K when EGL shows exactly the visible GPUs, and ``0 <= K < n``
  without the variable;
* else ``MUJOCO_EGL_DEVICE_ID=K``: must be an integer ``0 <= K < n``;
* else ``CUDA_VISIBLE_DEVICES`` (the first entry ``d``, as robosuite uses it): ``d`` when
  ``d < n`` (EGL lists every GPU of the host, in the same order); ``0`` when the host shows exactly
  the visible GPUs to EGL (``n`` equals the number of entries, e.g. a container given GPU 1 only);
  ``0`` when there is a single EGL device and the entries are not indices (GPU UUIDs, MIG ids);
* otherwise the choice is refused with one line that shows both variables, the device count and
  the fix.

The result is applied by pinning ``MUJOCO_EGL_DEVICE_ID`` and removing ``CUDA_VISIBLE_DEVICES``
from the rendering process (the env server and the eval env workers use no CUDA), so robosuite's
import-time assertion cannot fire. Nothing is changed when ``MUJOCO_GL`` is not ``egl``.

:func:`configure_rendering` does all of this for a process (the env server, the eval env workers
and :class:`rpent.robots.libero.sim.LiberoSim` call it before robosuite loads);
:func:`egl_device_for` maps a torch CUDA index to the EGL index of the same GPU.
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass

__all__ = [
    "EglDeviceError",
    "EglChoice",
    "count_egl_devices",
    "resolve_egl_device",
    "apply_egl_choice",
    "egl_device_for",
    "configure_rendering",
]


class EglDeviceError(ValueError):
    """No consistent EGL device: the message shows both variables, the device count and the fix."""


@dataclass(frozen=True)
class EglChoice:
    """The EGL device to render on.

    Attributes:
        device: EGL device index (0-based, into ``eglQueryDevicesEXT``), or None to leave the
            selection to robosuite (no variable set, or ``MUJOCO_GL`` is not egl).
        reason: one line for the log (where the index came from).
    """

    device: int | None
    reason: str


def count_egl_devices() -> int:
    """Number of EGL devices of this host (``eglQueryDevicesEXT``); 0 when EGL cannot be loaded.

    Loads MuJoCo's ``mujoco/egl/egl_ext.py`` binding by path: importing ``mujoco`` (or
    ``mujoco.egl``) with ``MUJOCO_GL=egl`` would already open a display on the device that
    ``MUJOCO_EGL_DEVICE_ID`` names, and fail on the very value this check is about.
    """
    import importlib.util

    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    try:
        spec = importlib.util.find_spec("mujoco")
        if spec is None or not spec.submodule_search_locations:
            return 0
        path = os.path.join(list(spec.submodule_search_locations)[0], "egl", "egl_ext.py")
        ext_spec = importlib.util.spec_from_file_location("_rpent_mujoco_egl_ext", path)
        module = importlib.util.module_from_spec(ext_spec)
        ext_spec.loader.exec_module(module)
        return len(module.eglQueryDevicesEXT())
    except Exception:  # noqa: BLE001 - no libEGL / no device extension: nothing to render on
        return 0


def _show(environ) -> str:
    def one(name: str) -> str:
        v = environ.get(name)
        return f"{name}={v}" if v is not None else f"{name} unset"

    return f"{one('CUDA_VISIBLE_DEVICES')}, {one('MUJOCO_EGL_DEVICE_ID')}"


def resolve_egl_device(cuda_device: int | None, environ, n_devices: int, flag: str = "--cuda-device") -> EglChoice:
    """Pick the EGL device (see the module docstring).

    Args:
        cuda_device: the ``--cuda-device`` value (torch's CUDA index) or None.
        environ: the process environment (read only).
        n_devices: :func:`count_egl_devices`.
        flag: how the caller's option is spelled in messages.
    Returns:
        :class:`EglChoice`.
    Raises:
        EglDeviceError: one line naming the values seen, the EGL devices that exist and the fix.
    """
    if environ.get("MUJOCO_GL", "egl").lower() != "egl":
        return EglChoice(None, f"MUJOCO_GL={environ.get('MUJOCO_GL')}: EGL device selection not used")
    valid = f"0..{n_devices - 1}" if n_devices else "none"
    fix_unset = "unset CUDA_VISIBLE_DEVICES / MUJOCO_EGL_DEVICE_ID for the simulator or"
    if n_devices == 0:
        raise EglDeviceError(
            f"no EGL device found ({_show(environ)}): install the GPU's EGL driver (libEGL, e.g. the NVIDIA "
            "driver's libegl) or Mesa's libegl1 for CPU rendering, or set MUJOCO_GL=osmesa"
        )
    if cuda_device is not None:
        if isinstance(cuda_device, bool) or not isinstance(cuda_device, int) or cuda_device < 0:
            raise EglDeviceError(f"{flag} must be a non-negative integer, got {cuda_device!r}")
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
        if not entries:
            if cuda_device >= n_devices:
                raise EglDeviceError(
                    f"{flag} {cuda_device} does not exist: this host has {n_devices} EGL device(s) ({valid}; "
                    f"{_show(environ)}); pass {flag} in {valid} or omit it")
            return EglChoice(cuda_device, f"{flag} {cuda_device}")
        # torch's cuda:K is the K-th entry of CUDA_VISIBLE_DEVICES; EGL numbers the host's GPUs
        if cuda_device >= len(entries):
            raise EglDeviceError(
                f"{flag} {cuda_device} is not visible: {_show(environ)} shows {len(entries)} GPU(s) (valid {flag}: "
                f"0..{len(entries) - 1}); this host has {n_devices} EGL device(s) ({valid})")
        if entries[cuda_device].isdigit() and int(entries[cuda_device]) < n_devices:
            phys = int(entries[cuda_device])
            return EglChoice(phys, f"{flag} {cuda_device} = GPU {phys} of CUDA_VISIBLE_DEVICES={visible}")
        if n_devices == len(entries):
            return EglChoice(cuda_device, f"{flag} {cuda_device}: EGL shows only the {n_devices} visible GPU(s)")
        raise EglDeviceError(
            f"{flag} {cuda_device} is entry {entries[cuda_device]!r} of {_show(environ)}, which is not one of this "
            f"host's {n_devices} EGL device(s) ({valid}): give integer GPU indices in CUDA_VISIBLE_DEVICES or "
            f"{fix_unset.removesuffix(' or')}")
    egl_id = environ.get("MUJOCO_EGL_DEVICE_ID")
    if egl_id not in (None, ""):
        if not egl_id.strip().isdigit() or int(egl_id) >= n_devices:
            raise EglDeviceError(
                f"MUJOCO_EGL_DEVICE_ID={egl_id} is not an EGL device of this host ({n_devices} device(s): {valid}; "
                f"{_show(environ)}): {fix_unset} set MUJOCO_EGL_DEVICE_ID in {valid} (or pass {flag} K)"
            )
        return EglChoice(int(egl_id), f"MUJOCO_EGL_DEVICE_ID={egl_id}")
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible in (None, ""):
        return EglChoice(None, f"no device variable set: robosuite's default among {n_devices} EGL device(s)")
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if entries and entries[0].isdigit():
        first = int(entries[0])
        if first < n_devices:
            return EglChoice(first, f"CUDA_VISIBLE_DEVICES={visible}: EGL device {first} (EGL lists every GPU)")
        if n_devices == len(entries):
            return EglChoice(0, f"CUDA_VISIBLE_DEVICES={visible}: EGL device 0 (EGL shows only the "
                                f"{n_devices} visible GPU(s))")
    elif entries and n_devices == 1:
        return EglChoice(0, f"CUDA_VISIBLE_DEVICES={visible}: the only EGL device (0)")
    raise EglDeviceError(
        f"cannot derive the EGL device from CUDA_VISIBLE_DEVICES={visible} ({_show(environ)}; this host has "
        f"{n_devices} EGL device(s): {valid}): {fix_unset} pass {flag} K (K in {valid}) or set MUJOCO_EGL_DEVICE_ID=K"
    )


def apply_egl_choice(choice: EglChoice, environ: MutableMapping[str, str] | None = None) -> None:
    """Pin ``MUJOCO_EGL_DEVICE_ID`` to ``choice.device`` and drop ``CUDA_VISIBLE_DEVICES`` (no-op for None).
    Must run before robosuite is imported."""
    env = os.environ if environ is None else environ
    if choice.device is None:
        return
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["MUJOCO_EGL_DEVICE_ID"] = str(choice.device)


def egl_device_for(cuda_device: int, visible: str | None = None) -> int:
    """The EGL device index that renders on the same GPU as torch's ``cuda:<cuda_device>``.

    torch numbers GPUs within ``CUDA_VISIBLE_DEVICES``; EGL numbers every GPU of the machine. With
    ``CUDA_VISIBLE_DEVICES="2,3"``, ``cuda:1`` is physical GPU 3, so EGL must use device 3. Without the
    variable (or empty) the two numberings are taken as equal. Both are assumed to follow the PCI bus
    order (NVIDIA's EGL does; set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so CUDA does too).

    Args:
        cuda_device: torch CUDA index (>= 0).
        visible: the ``CUDA_VISIBLE_DEVICES`` value (default: this process's).
    Raises:
        ValueError: ``cuda_device`` is not among the visible devices, or the variable lists GPU
            UUIDs/MIG ids (no EGL index can be derived: give integer indices).
    """
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return int(cuda_device)
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if not all(v.isdigit() for v in ids):
        raise ValueError(
            f"CUDA_VISIBLE_DEVICES={visible!r} lists GPU UUIDs; rendering needs integer GPU indices there "
            "(e.g. CUDA_VISIBLE_DEVICES=2,3) so the EGL device can match the policy's GPU"
        )
    if not 0 <= int(cuda_device) < len(ids):
        raise ValueError(
            f"cuda device {cuda_device} is not visible: CUDA_VISIBLE_DEVICES={visible!r} shows {len(ids)} GPU(s) "
            f"(valid --cuda-device: 0..{len(ids) - 1})"
        )
    return int(ids[int(cuda_device)])


def configure_rendering(cuda_device: int | None = None):
    """Prepare the process environment for headless MuJoCo rendering.

    Sets ``MUJOCO_GL=egl`` and ``PYOPENGL_PLATFORM=egl`` unless already set, then picks the EGL
    device from ``cuda_device`` / ``MUJOCO_EGL_DEVICE_ID`` / ``CUDA_VISIBLE_DEVICES`` and the EGL
    devices that exist (:func:`resolve_egl_device`), pins
    ``MUJOCO_EGL_DEVICE_ID`` to it and removes ``CUDA_VISIBLE_DEVICES`` (robosuite's import-time
    assertion would otherwise fail on multi-GPU hosts; RPent reference §9). Must run before
    robosuite is imported to take full effect.

    Args:
        cuda_device: torch's CUDA index (>= 0, within ``CUDA_VISIBLE_DEVICES``; the EGL device is
            the same physical GPU, :func:`egl_device_for`) or None to derive it from the environment.
    Returns:
        the :class:`EglChoice` applied.
    Raises:
        EglDeviceError (a ValueError): no consistent EGL device; one line
            with both variables, the devices that exist and the fix.
        RuntimeError: robosuite was already imported with a ``CUDA_VISIBLE_DEVICES`` that
            conflicts with the requested device.
    """
    os.environ.setdefault("MUJOCO_GL", "egl")
    if os.environ["MUJOCO_GL"] == "egl":
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    if isinstance(cuda_device, numbers.Integral) and not isinstance(cuda_device, bool):
        cuda_device = int(cuda_device)  # numpy integers too
    if cuda_device is not None and (isinstance(cuda_device, bool) or not isinstance(cuda_device, int) or cuda_device < 0):
        raise ValueError(f"cuda_device must be a non-negative integer, got {cuda_device!r}")
    if os.environ["MUJOCO_GL"] != "egl":
        return EglChoice(None, f"MUJOCO_GL={os.environ['MUJOCO_GL']}")
    choice = resolve_egl_device(cuda_device, os.environ, count_egl_devices())
    if choice.device is not None and "robosuite" in sys.modules and os.environ.get("CUDA_VISIBLE_DEVICES"):
        raise RuntimeError(
            "robosuite was imported while CUDA_VISIBLE_DEVICES was set; call "
            "configure_rendering(cuda_device) before importing robosuite/libero envs"
        )
    apply_egl_choice(choice)
    return choice
