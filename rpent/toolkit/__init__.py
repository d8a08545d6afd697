"""Robot-neutral tool machinery: declaring tools (:mod:`.registry`) and the execution contract
every robot's toolkit follows (:mod:`.base`; docs/interfaces.md "Toolkit").

A robot package (e.g. :mod:`rpent.robots.libero.toolkit`) subclasses :class:`Toolkit` and
declares its tools with :func:`tool`; planners and code mode see only :class:`ToolSpec` and
``execute``.
"""

from rpent.toolkit.base import Toolkit, ToolCancelled, ToolServiceError, strip_images
from rpent.toolkit.registry import BoundTool, ToolArgumentError, ToolSpec, build_spec, tool

__all__ = ["Toolkit", "ToolCancelled", "ToolServiceError", "strip_images", "BoundTool", "ToolArgumentError",
           "ToolSpec", "build_spec", "tool"]
