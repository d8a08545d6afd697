"""Read-only perception tools: ``view_env_state``, ``view_fixtures``, ``view_camera_meta``, ``back_project``, ``segment``.

Pixels are (row, col) of natural-orientation images (row 0 = top) of the step's recorded
``agentview.png``/``wrist.png`` — never of ``agentview_policy.png`` (mirrored left-right for
VLAs; reference §9 pitfall). World coordinates are metres in the LIBERO world frame.

``segment`` uses the SAM3 service when one is configured; otherwise it answers from the
simulator's instance segmentation by matching the prompt to object names
(:func:`rpent.robots.libero.strategy.match_object_names`) and says so (``source: "sim_oracle"``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from rpent.toolkit.base import ToolServiceError
from rpent.robots.libero.toolkit.observation import HIGH_SIZE, load_npz, read_json
from rpent.toolkit.registry import tool
from rpent.run.record import dumps_json, encode_png

__all__ = ["PerceptionTools", "MIN_SEGMENT_POINTS", "MIN_REGION_POINTS", "MAX_REGION_POINTS"]

#: A mask's world position is the median of at least this many valid points (reference §3.3).
MIN_SEGMENT_POINTS = 10
#: Region back-projection needs at least this many valid pixels after the z filter (reference §3.3).
MIN_REGION_POINTS = 8
#: most world points one ``back_project`` region call returns (``max_points``): ~100 kB of JSON.
MAX_REGION_POINTS = 4000
Camera = Literal["agentview", "wrist"]
Step = Annotated[int, Field(description="step index: 0 = initial, -1 = latest")]
SAM3_FALLBACK = "Use manual visual localization and back_project."


def _lowest_z(pts: np.ndarray) -> float:
    """The low side of an object's seen points ``pts`` ((N, 3) float, world frame, m): the 2nd
    percentile of their z, rounded to 0.1 mm. No floor is assumed (a held object hangs in the air)."""
    return round(float(np.percentile(pts[:, 2], 2)), 4)


def _estimate_dict(est) -> dict:
    """JSON form of an :class:`~rpent.robots.libero.skills.estimate.ObjectEstimate` (rounded to 0.1 mm)."""
    return {"center": [round(float(v), 4) for v in est.center], "top_z": round(est.top_z, 4),
            "bottom_z": round(est.bottom_z, 4), "major_yaw": round(est.major_yaw, 4),
            "major_extent": round(est.major_extent, 4), "minor_extent": round(est.minor_extent, 4),
            "ridge_yaw": None if est.ridge_yaw is None else round(est.ridge_yaw, 4), "source": est.source,
            "support": None if est.support is None else [round(float(v), 4) for v in est.support]}


class PerceptionTools:
    """Mixin of :class:`rpent.robots.libero.toolkit.LiberoToolkit` with the read-only tools."""

    # ------------------------------------------------------------------ helpers
    def _world_map(self, step_idx: int, camera: str, resolution: str) -> tuple[np.ndarray, str]:
        """World map [H,W,3] (m) of a step's camera; renders the 1024 px view on demand."""
        if resolution == "high":
            name = f"{camera}_world_high.npz"
            if name not in self.record.steps[step_idx]["artifacts"]:
                self.ensure_high_res(step_idx, camera)
        else:
            name = f"{camera}_world.npz"
        path = self.record.artifact_path(name, step_idx)
        return load_npz(path, "xyz").astype(np.float32), f"{name}/{path.name}"

    # ------------------------------------------------------------------ tools
    @tool(readonly=True)
    def view_env_state(self, step: Step = -1) -> dict:
        """The recorded state of a step: eef pose, gripper, terminated/truncated/success,
        the command that produced it, artifact names, plus the agentview and wrist images."""
        idx = self.record.resolve_step(step)
        return self.step_view(idx)

    @tool(readonly=True)
    def view_fixtures(self) -> dict:
        """Articulated parts of the scene's furniture as they are now: for each fixture (e.g.
        wooden_cabinet_1, flat_stove_1, microwave_1) its drawers / knobs / doors: part, joint,
        type (slide m / hinge rad), qpos, range, world joint axis, part origin, handle centre
        (m, world; None without a handle), the part's world box and its footprint (the corners, seen
        from above, of its box in its own frame, which turns with it: a door's line). Opening a LIBERO drawer
        moves it along -axis (its open range is negative); a stove knob is on at qpos >= 0.5."""
        return {"fixtures": self.env.call("env.fixture_parts"),
                "note": "live simulator state (not a recorded step); positions in metres, world frame"}

    @tool(readonly=True)
    def view_camera_meta(self, camera: Camera = "agentview", step: Step = -1) -> dict:
        """Camera calibration at a step: intrinsic_K (3x3, px), extrinsic_cam2world (4x4,
        OpenCV convention, m), depth near/far. The wrist extrinsic changes every step."""
        idx = self.record.resolve_step(step)
        meta = read_json(self.record.artifact_path(f"{camera}_metadata.json", idx))
        meta.pop("segmentation_ids", None)
        return {"camera": camera, "step": idx, "camera_meta": meta}

    @tool(readonly=True)
    def back_project(self,
                     row: Annotated[int | None, Field(description="pixel row (0 = top)")] = None,
                     col: Annotated[int | None, Field(description="pixel column (0 = left)")] = None,
                     row_range: Annotated[list[int] | None, Field(min_length=2, max_length=2, description="[r0, r1] region rows (inclusive)")] = None,
                     col_range: Annotated[list[int] | None, Field(min_length=2, max_length=2, description="[c0, c1] region columns (inclusive)")] = None,
                     step: Step = -1, camera: Camera = "agentview",
                     resolution: Annotated[Literal["high", "low"], Field(description="high = 1024 px, low = 256 px images")] = "high",
                     z_min: Annotated[float | None, Field(description="region mode: drop points below (m)")] = None,
                     z_max: Annotated[float | None, Field(description="region mode: drop points above (m)")] = None,
                     max_points: Annotated[int, Field(ge=0, le=MAX_REGION_POINTS, description="region mode: also return up to this many of the region's world points (after the z band, evenly spaced in image order, mm precision): a point cloud")] = 0) -> dict:
        """World xyz (m) of an image pixel (row, col) or of a region (row_range + col_range).
        Region mode: x/y from the bounding-box midpoint of valid points, z from their median,
        after the optional z band; needs >= 8 valid pixels; with ``max_points`` > 0 also
        ``points``: at most that many of those world points ([[x, y, z], ...], m, every k-th in
        row-major image order). Pixel coordinates refer to the chosen resolution (1024 or
        256 px) of the natural-orientation image."""
        pixel_mode = row is not None or col is not None
        region_mode = row_range is not None or col_range is not None
        if pixel_mode == region_mode or (pixel_mode and (row is None or col is None)) or (
                region_mode and (row_range is None or col_range is None)):
            raise ValueError("give either row and col (pixel mode) or row_range and col_range (region mode)")
        idx = self.record.resolve_step(step)
        world, source = self._world_map(idx, camera, resolution)
        h, w = world.shape[:2]
        if pixel_mode:
            if not (0 <= row < h and 0 <= col < w):
                raise ValueError(f"pixel ({row}, {col}) out of bounds for a {h}x{w} {resolution}-resolution image")
            xyz = world[row, col].astype(float)
            return {"world_xyz": [round(v, 4) for v in xyz], "pixel": [row, col], "camera": camera,
                    "step": idx, "source_artifact": source}
        r0, r1 = sorted(row_range)
        c0, c1 = sorted(col_range)
        if r0 < 0 or c0 < 0 or r1 >= h or c1 >= w:
            raise ValueError(f"region rows {r0}..{r1}, cols {c0}..{c1} out of bounds for a {h}x{w} image")
        pts = world[r0:r1 + 1, c0:c1 + 1].reshape(-1, 3).astype(np.float64)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if z_min is not None:
            pts = pts[pts[:, 2] >= z_min]
        if z_max is not None:
            pts = pts[pts[:, 2] <= z_max]
        if len(pts) < MIN_REGION_POINTS:
            raise ValueError(f"too few valid pixels in region after z-filter ({len(pts)} < {MIN_REGION_POINTS})")
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        center = [float((lo[0] + hi[0]) / 2), float((lo[1] + hi[1]) / 2), float(np.median(pts[:, 2]))]
        out = {"center_xyz": [round(v, 4) for v in center],
               "median_xyz": [round(float(v), 4) for v in np.median(pts, axis=0)],
               "n_valid": int(len(pts)), "camera": camera, "step": idx, "source_artifact": source}
        if max_points > 0:
            keep = np.unique(np.linspace(0, len(pts) - 1, min(int(max_points), len(pts))).astype(np.int64))
            out["points"] = np.round(pts[keep], 3).tolist()
        return out

    @tool(readonly=True)
    def segment(self,
                prompt: Annotated[str | None, Field(description="text prompt, e.g. 'alphabet soup'")] = None,
                point: Annotated[list[int] | None, Field(min_length=2, max_length=2, description="[row, col] point prompt (256 px image)")] = None,
                camera: Camera = "agentview", step: Step = -1,
                min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.2,
                all_instances: Annotated[bool, Field(description="also list every matching instance (e.g. both black bowls) with its own box and object_estimate")] = False) -> dict:
        """Segment an object in a recorded camera image (text or point prompt) and return
        found, score, box [x0, y0, x1, y1] (px), world_xyz (median of the mask's world points,
        m), world_extent, lowest_z (2nd percentile of the mask's world z, m: the low side of a held
        object), object_estimate (center, top_z, bottom_z, major_yaw (rad), major/minor
        extent (m) of the visible points: for planning grasps), pixel_count, source (sam3 or
        sim_oracle), image_size [width, height] (px), and the overlay image. With all_instances, ``instances`` lists every
        matching instance ({object, box, pixel_count, object_estimate, lowest_z}; SAM3 gives its best one)."""
        if (prompt is None) == (point is None):
            raise ValueError("segment needs exactly one of prompt or point")
        idx = self.record.resolve_step(step)
        rgb_path = self.record.artifact_path(f"{camera}.png", idx)
        from PIL import Image

        rgb = np.asarray(Image.open(rgb_path).convert("RGB"))
        seg_ids = None  # instance ids of the whole image (sim oracle only): for the support height
        if self.sam3 is not None:
            mask, score, source, extra = self._segment_sam3(rgb, prompt, point, min_score)
        else:
            mask, score, source, extra, seg_ids = self._segment_oracle(idx, camera, prompt, point)
        instance_masks = extra.pop("_instance_masks", None)  # sim oracle: every matching instance
        result: dict = {"found": False, "source": source, "camera": camera, "step": idx,
                        "image_size": [int(rgb.shape[1]), int(rgb.shape[0])], **extra}
        if source == "sim_oracle":
            result["note"] = ("no SAM3 service configured: answered from the simulator's instance "
                              "segmentation by matching the prompt to object names")
        if mask is None or not mask.any():
            result.setdefault("reason", "empty mask")
            return result
        from rpent.robots.libero.strategy import ObjectEstimate, erode_mask, support_height

        world, _ = self._world_map(idx, camera, "low")
        inner = erode_mask(mask)  # edge pixels carry background depth; keep the interior if it is big enough
        inner = inner if inner.sum() >= MIN_SEGMENT_POINTS else mask
        pts = world[inner].astype(np.float64)
        pts = pts[np.isfinite(pts).all(axis=1)]
        rows, cols = np.nonzero(mask)
        result.update({"found": True, "score": round(float(score), 4),
                       "box": [int(cols.min()), int(rows.min()), int(cols.max()), int(rows.max())],
                       "pixel_count": int(mask.sum())})
        if len(pts) >= MIN_SEGMENT_POINTS:
            result["world_xyz"] = [round(float(v), 4) for v in np.median(pts, axis=0)]
            lo, hi = np.percentile(pts, 5, axis=0), np.percentile(pts, 95, axis=0)
            result["world_extent"] = [round(float(v), 4) for v in (hi - lo)]  # 5-95th percentile size (m)
            result["lowest_z"] = _lowest_z(pts)
            floor_z = support_height(mask, world, seg_ids)
            est = ObjectEstimate.from_points(pts, floor_z=floor_z, source=f"{source}_{camera}_mask")
            result["object_estimate"] = _estimate_dict(est)
        else:
            result["world_xyz"] = None
            result["world_error"] = f"only {len(pts)} valid mask points (< {MIN_SEGMENT_POINTS})"
        if all_instances:
            result["instances"] = self._instances(instance_masks or {extra.get("object", prompt): mask},
                                                  world, seg_ids, f"{source}_{camera}_mask")
        overlay = rgb.copy()
        overlay[mask] = (0.5 * overlay[mask] + 0.5 * np.array([255, 0, 0])).astype(np.uint8)
        n = self.next_segment_index()
        # the artifact also keeps the query, so the run's recipe can list this call (record.recipe_commands)
        query = {"prompt": prompt} if prompt is not None else {"point": list(point)}
        self.record.add_artifact_to_step(idx, f"segment_{n:02d}.json",
                                         dumps_json({**result, "query": query}).encode("utf-8"))
        self.record.add_artifact_to_step(idx, f"segment_overlay_{n:02d}.png", encode_png(overlay))
        result["segment_artifact"] = f"segment_{n:02d}.json/{idx:02d}.json"
        result["overlay_artifact"] = f"segment_overlay_{n:02d}.png/{idx:02d}.png"
        result["_images"] = [{"label": f"segment overlay ({camera}, step {idx})", "png": encode_png(overlay)}]
        return result

    def _segment_oracle(self, idx: int, camera: str, prompt, point):
        from rpent.robots.libero.strategy import match_object_names

        seg_name = f"{camera}_seg.npz"
        if seg_name not in self.record.steps[idx]["artifacts"]:
            raise ValueError(f"no simulator segmentation recorded for camera {camera!r} at step {idx}; "
                             "use camera 'agentview'")
        ids = load_npz(self.record.artifact_path(seg_name, idx), "ids")
        table = {int(k): v for k, v in read_json(self.record.artifact_path(f"{camera}_metadata.json", idx))
                 .get("segmentation_ids", {}).items()}
        if point is not None:
            r, c = point
            if not (0 <= r < ids.shape[0] and 0 <= c < ids.shape[1]):
                raise ValueError(f"point {point} out of bounds for a {ids.shape[0]}x{ids.shape[1]} image")
            inst = int(ids[r, c])
            if inst == 0 or table.get(inst) == "robot":
                return None, 0.0, "sim_oracle", {"reason": "no object at that point"}, ids
            return ids == inst, 1.0, "sim_oracle", {"object": table.get(inst)}, ids
        names = match_object_names(prompt, [n for n in table.values()])
        if not names:
            known = sorted({n for n in table.values() if n != "robot"})
            return None, 0.0, "sim_oracle", {"reason": f"no visible object matches {prompt!r}",
                                              "visible_objects": known}, ids
        # several indistinguishable instances: take the one with the most visible pixels
        best = max((i for i, n in table.items() if n in names), key=lambda i: int((ids == i).sum()))
        extra = {"object": table[best], "_instance_masks": {table[i]: ids == i for i, n in table.items() if n in names}}
        if len(names) > 1:
            extra["other_candidates"] = [n for n in names if n != table[best]]
        return ids == best, 1.0, "sim_oracle", extra, ids

    @staticmethod
    def _instances(masks: dict, world: np.ndarray, seg_ids, source: str) -> list[dict]:
        """Per-instance {object, box, pixel_count, object_estimate, lowest_z} for ``segment(all_instances=True)``
        (``lowest_z``: 2nd percentile of the seen points' world z, m: an object held in the air has no floor)."""
        from rpent.robots.libero.strategy import ObjectEstimate, erode_mask, support_height

        out = []
        for name, m in masks.items():
            if not m.any():
                continue
            inner = erode_mask(m)
            inner = inner if inner.sum() >= MIN_SEGMENT_POINTS else m
            pts = world[inner].astype(np.float64)
            pts = pts[np.isfinite(pts).all(axis=1)]
            rows, cols = np.nonzero(m)
            item = {"object": name, "box": [int(cols.min()), int(rows.min()), int(cols.max()), int(rows.max())],
                    "pixel_count": int(m.sum()), "object_estimate": None}
            if len(pts) >= MIN_SEGMENT_POINTS:
                est = ObjectEstimate.from_points(pts, floor_z=support_height(m, world, seg_ids), source=source)
                item["object_estimate"] = _estimate_dict(est)
                item["lowest_z"] = _lowest_z(pts)
            out.append(item)
        return out

    def _segment_sam3(self, rgb, prompt, point, min_score):
        try:
            reply = self.sam3.call("sam3.segment", rgb, text_prompt=prompt, point=point, min_score=min_score,
                                   timeout=120.0)
        except Exception as exc:  # noqa: BLE001 — a service failure is a result with a fallback
            raise ToolServiceError(f"SAM3 service failed: {exc}", fallback=SAM3_FALLBACK) from None
        if not reply.get("found"):
            return None, 0.0, "sam3", {"reason": reply.get("reason", "SAM3 returned no candidate")}
        shape = tuple(reply["mask_shape"])
        mask = np.unpackbits(np.asarray(reply["mask_bits"], dtype=np.uint8))[: shape[0] * shape[1]]
        mask = mask.reshape(shape).astype(bool)
        if mask.shape != rgb.shape[:2]:
            raise ToolServiceError(f"SAM3 mask shape {mask.shape} != image shape {rgb.shape[:2]}",
                                   fallback=SAM3_FALLBACK)
        return mask, float(reply.get("score", 0.0)), "sam3", {}

    def ensure_high_res(self, step_idx: int, camera: str) -> None:
        """Render the 1024 px view of the latest step on demand (the simulator renders only now)."""
        if step_idx != len(self.record.steps) - 1:
            raise ValueError(f"the {HIGH_SIZE} px view of step {step_idx} was not rendered and the scene has "
                             "moved on since; use resolution='low' for past steps")
        self.capture_high_res(camera)
