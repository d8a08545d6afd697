"""Render one frame with MuJoCo through EGL and print what happened as one JSON line.

Run by ``rpent doctor`` in a subprocess (``python -m rpent.doctor.egl_frame``) with
``MUJOCO_GL=egl``: importing ``mujoco.egl`` opens a display on an EGL device, which can hang or
abort the process on a broken driver, so it never runs inside the doctor's own process.

Output (stdout, one line): ``{"ok": true, "shape": [32, 32, 3], "mean": float, "renderer": str,
"vendor": str, "egl_devices": int, "mujoco": str, "seconds": float}``, or ``{"ok": false,
"error": "<exception type>: <message>", "mujoco": str | null}``. Exit status 0 either way
(a crash or a timeout is the caller's to report).
"""

from __future__ import annotations

import json
import os
import sys
import time

#: A lit red box in front of the default free camera: a working renderer gives a non-black image.
SCENE = ('<mujoco><worldbody><light pos="0 0 1"/>'
         '<geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/></worldbody></mujoco>')


def _gl_strings() -> tuple[str, str]:
    """``GL_RENDERER`` and ``GL_VENDOR`` of the current context ("" when they cannot be read)."""
    try:
        from OpenGL import GL

        return (GL.glGetString(GL.GL_RENDERER) or b"").decode(), (GL.glGetString(GL.GL_VENDOR) or b"").decode()
    except Exception:  # noqa: BLE001 - the strings are informative only
        return "", ""


def main() -> int:
    """Render a 32x32 RGB frame (uint8) of :data:`SCENE` and print the JSON line described above."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    t0 = time.monotonic()
    version = None
    try:
        import mujoco

        version = mujoco.__version__
        model = mujoco.MjModel.from_xml_string(SCENE)
        data = mujoco.MjData(model)
        renderer = mujoco.Renderer(model, 32, 32)
        mujoco.mj_forward(model, data)
        renderer.update_scene(data)
        image = renderer.render()
        gl_renderer, gl_vendor = _gl_strings()
        from rpent.robots.libero.egl import count_egl_devices

        out = {"ok": True, "shape": list(image.shape), "mean": float(image.mean()), "renderer": gl_renderer,
               "vendor": gl_vendor, "egl_devices": count_egl_devices(), "mujoco": version,
               "seconds": round(time.monotonic() - t0, 3)}
    except BaseException as exc:  # noqa: BLE001 - reported to the caller as data
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}".strip(), "mujoco": version}
    print(json.dumps(out), flush=True)
    os._exit(0)  # skip interpreter teardown: a failed EGL context raises again in its __del__


if __name__ == "__main__":
    sys.exit(main())
