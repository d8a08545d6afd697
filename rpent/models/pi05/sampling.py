"""Running the Pi0.5 sampler on a batch: device transfer, prompt padding, batch buckets, CUDA graphs.

:class:`Pi05Runner` takes CPU arrays (uint8 images, token id lists, noise) and returns normalised action
chunks. On CUDA it captures one ``torch.cuda.CUDAGraph`` per (batch bucket, view shape, prompt length, masked)
key over the whole sampler (uint8 -> [-1, 1] resize/scale of the views, SigLIP, the prefix pass that
fills the K/V cache and all N flow steps),
so a query replays one graph instead of launching thousands of kernels (reference section 7, technique 1).

Shapes:

* batch: padded up to the next bucket in ``batch_buckets`` (1, 2, 4, 8, 12, 16); rows beyond B are
  independent dummies whose results are dropped (no cross-row attention exists).
* prompt: a single prompt, or several of equal length, run at their exact length with no mask (flash
  attention path). Prompts of different lengths are padded to a multiple of ``text_bucket`` (8) and
  masked; masked keys take no RoPE position, so the result equals the unpadded one up to float rounding.

Without CUDA (or with ``use_cuda_graphs=False``) the same code runs eagerly; that is the "plain eager"
baseline of ``benchmarks/vla_bench.py``.

:meth:`Pi05Runner.launch` starts a call without waiting for it (pinned staging buffers, asynchronous
copies, an event per call): the server's batch worker gathers and queues the next batch while one runs
(:mod:`rpent.models.pi05.batching`, pipelined mode); :meth:`Pi05Runner.run` is ``launch(...).result()``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque

import numpy as np
import torch

from rpent.models.pi05.model import Pi05Model
from rpent.models.pi05.processor import images_to_model

DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 12, 16)


class _Graph:
    """One captured sampler call with its static input/output buffers."""

    def __init__(self, graph: torch.cuda.CUDAGraph, images, ids, mask, noise, out):
        self.graph, self.images, self.ids, self.mask, self.noise, self.out = graph, images, ids, mask, noise, out


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_LOCK = _NoLock()


class PendingRun:
    """A model call in flight (:meth:`Pi05Runner.launch`): :meth:`result` waits for it (releasing the GIL)
    and returns float32 [B, H, 32]. ``parts`` are (pinned host tensor, end CUDA event, start CUDA event or
    None) triples, or (ready array, None, None). ``gpu_log``: where :meth:`result` appends
    (monotonic s at completion, GPU ms from the start to the end event) for each timed part."""

    def __init__(self, parts: list, cuda_lock: threading.Lock | None = None, gpu_log: deque | None = None):
        self._parts = parts
        self._cuda_lock = cuda_lock
        self._gpu_log = gpu_log

    def done(self) -> bool:
        """Whether every part has finished on the GPU (never blocks)."""
        return all(ev is None or ev.query() for _, ev, _ in self._parts)

    def result(self) -> np.ndarray:
        """Block until the call finished; float32 [B, H, 32] normalised actions (a fresh array)."""
        outs = []
        for out, ev, start in self._parts:
            if ev is not None:
                # no CUDA call of this (results) thread may overlap a graph capture on the launching thread
                with self._cuda_lock or _NO_LOCK:
                    ev.synchronize()
                    out = out.numpy().copy()  # the pinned block goes back to the caching host allocator
                    if start is not None and self._gpu_log is not None:
                        self._gpu_log.append((time.monotonic(), start.elapsed_time(ev)))
            outs.append(out)
        self._parts = [(o, None, None) for o in outs]
        return outs[0] if len(outs) == 1 else np.concatenate(outs, 0)


class Pi05Runner:
    """Executes :meth:`Pi05Model.sample_actions` for CPU inputs; thread-safe (one call at a time).

    Args:
        model: the loaded model (its device decides eager CPU vs CUDA).
        use_cuda_graphs: capture/replay CUDA graphs (only when the model is on CUDA and
            ``torch.cuda.is_available()``).
        batch_buckets: batch sizes graphs are captured for; larger batches are split.
        text_bucket: padded prompt lengths are rounded up to a multiple of this.
        max_graphs: captured graphs kept (least recently used are dropped).
        lazy_capture: until the first graph is captured, the first call of a shape (batch bucket, views,
            prompt length) runs eagerly and the next call of that shape captures its graph, so a fresh
            server answers its first request without waiting for a capture (about 1 s at full size); later
            shapes are captured at their first call (a shape first seen under load would otherwise run
            eagerly and then stall the queue with its capture). False: capture at the first call.
    """

    def __init__(
        self,
        model: Pi05Model,
        use_cuda_graphs: bool = True,
        batch_buckets: tuple[int, ...] = DEFAULT_BATCH_BUCKETS,
        text_bucket: int = 8,
        max_graphs: int = 96,
        lazy_capture: bool = False,
    ):
        self.model = model
        self.lazy_capture = lazy_capture
        self._ran_eagerly: set[tuple] = set()  # shapes whose first call ran eagerly (lazy_capture)
        self.eager_calls = 0
        self.cfg = model.cfg
        self.device = model.device
        self.dtype = model.dtype
        self.use_graphs = bool(use_cuda_graphs and torch.cuda.is_available() and self.device.type == "cuda")
        self.batch_buckets = tuple(sorted(batch_buckets))
        self.text_bucket = text_bucket
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        self._lock = threading.Lock()
        self._cuda_lock = threading.Lock()  # held while capturing; PendingRun.result takes it around its CUDA calls
        self.graph_captures = 0
        self._tuned: dict[int, dict] = {}
        #: (monotonic s at completion, GPU ms) of the last graph replays collected by PendingRun.result:
        #: the GPU time of each batch from its input copies to its output copy (see :meth:`gpu_stats`)
        self.gpu_log: deque = deque(maxlen=256)

    def gpu_stats(self) -> dict:
        """GPU time per model call over the last 32 graph replays: ``gpu_ms`` (median ms from the input copies
        to the output copy) and ``gpu_busy`` (their GPU time over the wall time from the first to the last
        completion: near 1 when the GPU never waits for the host, e.g. under many concurrent clients);
        empty without CUDA graphs."""
        log = list(self.gpu_log)[-32:]
        if not log:
            return {}
        out = {"gpu_ms": float(np.median([ms for _, ms in log])), "gpu_calls": len(log)}
        if len(log) >= 3:
            span = log[-1][0] - log[0][0]
            if span > 0:
                out["gpu_busy"] = float(sum(ms for _, ms in log[1:]) / 1e3 / span)
        return out

    @property
    def max_batch(self) -> int:
        """Largest batch one model call takes (the last bucket)."""
        return self.batch_buckets[-1]

    def _bucket(self, b: int) -> int:
        for s in self.batch_buckets:
            if s >= b:
                return s
        return b

    def run(self, images: np.ndarray, token_ids: list[np.ndarray], noise: np.ndarray) -> np.ndarray:
        """Sample normalised action chunks.

        Args:
            images: uint8 [B, V, H, W, 3].
            token_ids: B int64 arrays of prompt tokens (lengths may differ).
            noise: float32 [B, H, 32] initial flow state.

        Returns:
            float32 [B, H, 32] normalised actions.

        Raises:
            ValueError: inconsistent batch sizes.
        """
        b = images.shape[0]
        if len(token_ids) != b or noise.shape[0] != b:
            raise ValueError(f"batch mismatch: {b} images, {len(token_ids)} prompts, {noise.shape[0]} noise rows")
        return self.launch(images, token_ids, noise).result()

    def launch(self, images: np.ndarray, token_ids: list[np.ndarray], noise: np.ndarray) -> PendingRun:
        """Start :meth:`run` without waiting for the GPU: with CUDA graphs the inputs are staged in pinned
        host memory, copied and replayed on the current stream, and the output copied back
        asynchronously, so the caller can gather the next batch (and launch it, queued behind this one on
        the same stream) while this one runs. Same arguments and errors as :meth:`run`; static graph
        buffers are reused in stream order, so several launches may be in flight."""
        b = images.shape[0]
        if len(token_ids) != b or noise.shape[0] != b:
            raise ValueError(f"batch mismatch: {b} images, {len(token_ids)} prompts, {noise.shape[0]} noise rows")
        with self._lock:
            return PendingRun([
                self._launch(images[i:i + self.max_batch], token_ids[i:i + self.max_batch], noise[i:i + self.max_batch])
                for i in range(0, b, self.max_batch)
            ], self._cuda_lock, self.gpu_log)

    def _text(self, token_ids: list[np.ndarray], rows: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        lens = [len(t) for t in token_ids]
        if len(set(lens)) == 1:
            ids = np.zeros((rows, lens[0]), dtype=np.int64)
            ids[: len(token_ids)] = np.stack(token_ids)
            return torch.from_numpy(ids), None
        t = -(-max(lens) // self.text_bucket) * self.text_bucket
        ids = np.zeros((rows, t), dtype=np.int64)
        mask = np.zeros((rows, t), dtype=bool)
        mask[len(token_ids):, 0] = True  # dummy rows: one valid token
        for i, row in enumerate(token_ids):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = True
        return torch.from_numpy(ids), torch.from_numpy(mask)

    def _launch(self, images: np.ndarray, token_ids: list[np.ndarray], noise: np.ndarray) -> tuple:
        b = images.shape[0]
        rows = self._bucket(b) if self.use_graphs else b
        ids, mask = self._text(token_ids, rows)
        dev = self.device
        img_u8 = torch.from_numpy(np.ascontiguousarray(images))
        nz = torch.from_numpy(np.ascontiguousarray(noise, dtype=np.float32))
        if dev.type == "cuda":
            self._tune(rows)
        key = (rows, tuple(images.shape[1:]), ids.shape[1], mask is not None)
        g = self._graphs.get(key) if self.use_graphs else None
        if (g is None and self.use_graphs and self.lazy_capture and not self.graph_captures
                and key not in self._ran_eagerly):
            self._ran_eagerly.add(key)  # first call of this shape: answer now, capture at the next one
            self.eager_calls += 1
            return self._eager(img_u8, ids, nz, mask, b)
        if not self.use_graphs:
            return self._eager(img_u8, ids, nz, mask, b)
        if g is None:
            g = self._capture(key, ids, mask)
        else:
            self._graphs.move_to_end(key)
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        # pinned staging: the copies are truly asynchronous (a pageable source would block this thread
        # until the previous replay finished); the caching host allocator keeps each block until its copy is done
        g.images[:b].copy_(img_u8.pin_memory(), non_blocking=True)
        g.ids.copy_(ids.pin_memory(), non_blocking=True)
        if mask is not None:
            g.mask.copy_(mask.pin_memory(), non_blocking=True)
        g.noise[:b].copy_(nz.pin_memory(), non_blocking=True)
        g.graph.replay()
        out = torch.empty((b, *g.out.shape[1:]), dtype=g.out.dtype, pin_memory=True)
        out.copy_(g.out[:b], non_blocking=True)
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return out, ev, start

    def _eager(self, img_u8: torch.Tensor, ids: torch.Tensor, nz: torch.Tensor, mask: torch.Tensor | None, b: int) -> tuple:
        """One call without a graph (rows beyond ``b`` are padding and dropped)."""
        dev = self.device
        rows = ids.shape[0]
        if rows > b:  # the graph bucket's dummy rows: not needed eagerly
            ids, mask = ids[:b], None if mask is None else mask[:b]
        img = images_to_model(img_u8.to(dev), self.cfg.vision.image_size, self.dtype)
        out = self.model.sample_actions(img, ids.to(dev), nz.to(dev), None if mask is None else mask.to(dev))
        return out.cpu().numpy(), None, None

    def _tune(self, rows: int) -> None:
        """Once per batch size: choose cuBLAS or the skinny kernel for the expert's projections at
        rows*H action tokens (timed on this GPU, outside any capture; :func:`fused.tune_skinny`)."""
        if rows not in self._tuned:
            self._tuned[rows] = self.model.expert.tune_linears(rows * self.cfg.action_horizon)

    def _sample(self, images_u8: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The captured work: uint8 views -> model images (resize, scale) -> sampler."""
        img = images_to_model(images_u8, self.cfg.vision.image_size, self.dtype)
        return self.model.sample_actions(img, ids, noise, mask)

    def _capture(self, key: tuple, ids: torch.Tensor, mask: torch.Tensor | None) -> _Graph:
        with self._cuda_lock:
            return self._capture_locked(key, ids, mask)

    def _capture_locked(self, key: tuple, ids: torch.Tensor, mask: torch.Tensor | None) -> _Graph:
        rows, view_shape, t, masked = key
        dev = self.device
        s_img = torch.zeros((rows, *view_shape), dtype=torch.uint8, device=dev)
        s_ids = ids.to(dev).clone()
        s_mask = mask.to(dev).clone() if masked else None
        s_noise = torch.zeros((rows, self.cfg.action_horizon, self.cfg.max_action_dim), dtype=torch.float32, device=dev)
        side = torch.cuda.Stream(device=dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up: lazy kernel/cuBLAS/Triton init must not happen inside capture
                self._sample(s_img, s_ids, s_noise, s_mask)
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            out = self._sample(s_img, s_ids, s_noise, s_mask)
        g = _Graph(graph, s_img, s_ids, s_mask, s_noise, out)
        self._graphs[key] = g
        self.graph_captures += 1
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        return g

    def warmup(self, num_views: int, image_hw: tuple[int, int], prompt_lengths=(16,), batch_sizes=(1,)) -> None:
        """Capture graphs (or run eagerly once) ahead of the first request for the given shapes."""
        hz, a = self.cfg.action_horizon, self.cfg.max_action_dim
        for b in batch_sizes:
            for t in prompt_lengths:
                imgs = np.zeros((b, num_views, *image_hw, 3), dtype=np.uint8)
                self.run(imgs, [np.ones(t, dtype=np.int64)] * b, np.zeros((b, hz, a), dtype=np.float32))
