"""Tool result -> model content, and image references for transcripts.

Convention (RPent reference §3.1): the result dict is dumped to indented JSON text,
truncated at 60 000 bytes with a ``[truncated]`` marker; images travel separately. In
this project images are the ``_images`` list of ``{"label": str, "png": bytes}``
(docs/interfaces.md), emitted as PNG image blocks in list order. ``_finish: True``
without an ``"error"`` key is an accepted finish; a finish that comes back with an
``"error"`` (refused) does not end the loop.

Neutral content blocks used by all planners (plain dicts):

* ``{"type": "text", "text": str}``
* ``{"type": "image", "label": str, "png": bytes, "ref": str}`` — in memory only;
  transcripts hold :func:`image_ref` instead (no bytes).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_RESULT_TEXT_BYTES",
    "ToolResultContent",
    "finish_of",
    "image_ref",
    "jsonable_result",
    "result_text",
    "to_tool_content",
    "transcript_blocks",
]

MAX_RESULT_TEXT_BYTES = 60_000
"""Cap on a tool result's JSON text (bytes, UTF-8); source: RPent reference §3.1."""

TRUNCATED_MARKER = "\n[truncated]"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return f"<{len(obj)} bytes>"
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return tolist()
    return str(obj)


def jsonable_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without ``_images``, with bytes/numpy values made JSON-able (for events)."""
    return json.loads(json.dumps({k: v for k, v in result.items() if k != "_images"}, default=_json_default))


def result_text(result: dict[str, Any], limit: int = MAX_RESULT_TEXT_BYTES) -> str:
    """Indented JSON text of ``result`` minus ``_images``, cut at ``limit`` UTF-8 bytes.

    A cut text ends with ``"\\n[truncated]"`` (the marker is not counted in ``limit``).
    """
    text = json.dumps({k: v for k, v in result.items() if k != "_images"}, indent=2,
                      ensure_ascii=False, default=_json_default)
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore") + TRUNCATED_MARKER


def image_ref(label: str, png: bytes) -> dict[str, Any]:
    """Transcript reference for an image: ``{"type": "image", "label", "ref", "media_type",
    "bytes", "sha256"}``; ``ref`` is ``"sha256:<first 16 hex>"`` of the PNG bytes."""
    digest = hashlib.sha256(png).hexdigest()
    return {"type": "image", "label": label, "ref": f"sha256:{digest[:16]}", "media_type": "image/png",
            "bytes": len(png), "sha256": digest}


@dataclass
class ToolResultContent:
    """A tool result converted for the model.

    Attributes:
        blocks: neutral blocks: one text block, then one image block per ``_images`` entry.
        is_error: the result has an ``"error"`` key.
        finish: ``(status, summary)`` when it is an accepted finish, else None.
    """

    blocks: list[dict[str, Any]] = field(default_factory=list)
    is_error: bool = False
    finish: tuple[str, str] | None = None

    @property
    def text(self) -> str:
        """The text block's text."""
        return "".join(b["text"] for b in self.blocks if b["type"] == "text")

    @property
    def images(self) -> list[dict[str, Any]]:
        """The image blocks (with bytes)."""
        return [b for b in self.blocks if b["type"] == "image"]


def finish_of(result: dict[str, Any]) -> tuple[str, str] | None:
    """``(status, summary)`` when ``result`` is an accepted finish (``_finish`` true and
    no ``error``), else None."""
    if result.get("_finish") is True and "error" not in result:
        return str(result.get("status", "")), str(result.get("summary", ""))
    return None


def to_tool_content(result: dict[str, Any], *, no_images: bool = False) -> ToolResultContent:
    """Convert a toolkit result dict into model content.

    Args:
        result: the dict ``toolkit.execute`` returned.
        no_images: replace every image with a text note (``--no-images``), so no image
            bytes reach the provider.

    Returns:
        :class:`ToolResultContent`. Malformed ``_images`` entries (no ``png`` bytes) become
        a text note rather than an exception.
    """
    if not isinstance(result, dict):
        result = {"error": f"toolkit returned {type(result).__name__}, expected dict", "value": str(result)[:2000]}
    blocks: list[dict[str, Any]] = [{"type": "text", "text": result_text(result)}]
    for i, img in enumerate(result.get("_images") or []):
        label = str(img.get("label", f"image_{i}")) if isinstance(img, dict) else f"image_{i}"
        png = img.get("png") if isinstance(img, dict) else None
        if not isinstance(png, (bytes, bytearray)) or not png:
            blocks.append({"type": "text", "text": f"[image '{label}' missing PNG bytes]"})
        elif no_images:
            blocks.append({"type": "text", "text": f"[image '{label}' not sent: --no-images]"})
        else:
            ref = image_ref(label, bytes(png))["ref"]
            blocks.append({"type": "image", "label": label, "png": bytes(png), "ref": ref})
    return ToolResultContent(blocks=blocks, is_error="error" in result, finish=finish_of(result))


def b64_len(n: int) -> int:
    """Length of the base64 text of ``n`` bytes."""
    return 4 * ((n + 2) // 3)


def fit_images(content: ToolResultContent, budget_b64_bytes: int) -> ToolResultContent:
    """Downscale the images of ``content`` until their base64 text fits ``budget_b64_bytes`` in total.

    Each too-large image is resized (PIL, Lanczos, aspect kept) by the square root of the byte
    ratio (times 0.9) and re-encoded as PNG, repeatedly, down to 16 px; a text note after it says
    ``[image 'agentview' downscaled from 2400x2400 to 1320x1320 px to fit the agent CLI's message
    limit]``, so the model and the transcript know. Images are shrunk largest first.

    Args:
        content: a converted tool result.
        budget_b64_bytes: base64 bytes all images of this result may take together.
    Returns:
        ``content`` itself when it fits, else a new :class:`ToolResultContent`.
    """
    images = [b for b in content.blocks if b.get("type") == "image"]
    total = sum(b64_len(len(b["png"])) for b in images)
    if total <= budget_b64_bytes:
        return content
    from PIL import Image

    new = {id(b): dict(b) for b in images}
    notes: dict[int, str] = {}
    order = sorted(images, key=lambda b: len(b["png"]), reverse=True)
    for b in order:
        total = sum(b64_len(len(x["png"])) for x in new.values())
        if total <= budget_b64_bytes:
            break
        cur = new[id(b)]
        with Image.open(io.BytesIO(cur["png"])) as im:
            img = im.convert("RGB") if im.mode not in ("RGB", "RGBA", "L") else im.copy()
        w0, h0 = img.size
        other = total - b64_len(len(cur["png"]))
        allowed = max(1, budget_b64_bytes - other)
        w, h = w0, h0
        png = cur["png"]
        while b64_len(len(png)) > allowed and min(w, h) > 16:
            f = min(0.9, 0.9 * (allowed / b64_len(len(png))) ** 0.5)
            w, h = max(16, int(w * f)), max(16, int(h * f))
            buf = io.BytesIO()
            img.resize((w, h), Image.LANCZOS).save(buf, format="PNG")
            png = buf.getvalue()
        cur["png"] = png
        cur["ref"] = image_ref(cur["label"], png)["ref"]
        notes[id(b)] = (f"[image '{cur['label']}' downscaled from {w0}x{h0} to {w}x{h} px to fit the agent CLI's "
                        "message limit]")
    blocks: list[dict[str, Any]] = []
    for b in content.blocks:
        if b.get("type") == "image":
            blocks.append(new[id(b)])
            if id(b) in notes:
                blocks.append({"type": "text", "text": notes[id(b)]})
        else:
            blocks.append(b)
    return ToolResultContent(blocks=blocks, is_error=content.is_error, finish=content.finish)


def transcript_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``blocks`` with image bytes replaced by :func:`image_ref` references."""
    out = []
    for b in blocks:
        if b.get("type") == "image" and "png" in b:
            out.append(image_ref(b.get("label", ""), b["png"]))
        else:
            out.append({k: v for k, v in b.items() if k != "provider_item"})
    return out


def b64(png: bytes) -> str:
    """Base64 (ASCII) of ``png`` for wire formats."""
    return base64.b64encode(png).decode("ascii")
