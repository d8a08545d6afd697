"""What one run is: :class:`RunConfig` (built by the CLI and the TUI) and :class:`RunOutcome`."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rpent.planners.base import PlannerConfig
from rpent.recording.outcome import RUN_LABELS, run_label, verdict_disagreement

__all__ = ["RunConfig", "RunOutcome", "default_output_dir", "run_label", "verdict_disagreement", "RUN_LABELS",
           "EXIT_SUCCESS", "EXIT_TASK_FAILED", "EXIT_ERROR", "SEED_MAX", "MAX_EPISODE_STEPS_MAX", "check_seed",
           "check_max_episode_steps"]

#: ``rpent`` exit codes: the environment's success predicate held / the run ended without
#: success / the run could not complete (bad arguments, service or planner error).
EXIT_SUCCESS, EXIT_TASK_FAILED, EXIT_ERROR = 0, 1, 2


#: Largest seed a run accepts: the largest signed 64-bit integer. A seed travels through the RPC
#: codec (msgpack integers: -2**63 .. 2**64 - 1; :mod:`rpent.rpc.codec`), the env servers' episode
#: identity and numpy int64 fields of records and exports; the simulators use ``seed mod
#: n_init_states`` (LIBERO) or ``seed mod 50`` (Meta-World), so every seed in 0..SEED_MAX is valid.
SEED_MAX = 2**63 - 1
#: Largest ``--max-episode-steps``: the same signed 64-bit limit (the step limit crosses the codec too).
MAX_EPISODE_STEPS_MAX = 2**63 - 1


def check_seed(seed: int, flag: str = "--seed") -> None:
    """Refuse a seed outside ``0..SEED_MAX``.

    Raises:
        ValueError: naming the flag, the value and the valid range.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"{flag} {seed} is out of range: valid seeds are 0..{SEED_MAX} (2**63 - 1; the init state "
                         "is seed mod the task's number of init states)")


def check_max_episode_steps(steps: int, flag: str = "--max-episode-steps") -> None:
    """Refuse a step limit outside ``1..MAX_EPISODE_STEPS_MAX``.

    Raises:
        ValueError: naming the flag, the value and the valid range.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_EPISODE_STEPS_MAX:
        raise ValueError(f"{flag} {steps} is out of range: valid step limits are 1..{MAX_EPISODE_STEPS_MAX} env steps")


def default_output_dir(suite: str, task: int, seed: int, root: str | Path = "logs") -> Path:
    """``<root>/<YYYYmmdd-HHMMSS>_<suite>_t<task>_s<seed>`` (reference §6.1, without ':' so the
    path is valid on every filesystem); a numeric suffix is added if it already exists."""
    base = Path(root) / f"{time.strftime('%Y%m%d-%H%M%S')}_{suite}_t{task}_s{seed}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


@dataclass
class RunConfig:
    """One run of one task.

    Attributes:
        suite, task, seed: the LIBERO episode (seed selects the init state).
        libero_type: ``standard`` | ``pro`` | None (``$LIBERO_TYPE``, default pro).
        max_episode_steps: env steps before truncation.
        planner: ``scripted`` | ``api`` | ``claude_code`` | ``codex`` | ``flash``.
        planner_config: model, limits and provider options for the planner.
        output_dir: run directory (None: :func:`default_output_dir`).
        env_endpoint, vla_endpoint, sam3_endpoint: attach to running services instead of
            spawning them (``[http|socket://]HOST:PORT``).
        vla_model_path: Pi0.5 checkpoint for a spawned VLA server (default ``$PI05_CHECKPOINT_PATH``).
        sam3_checkpoint: SAM3 checkpoint for a spawned SAM3 server (default ``$SAM3_CHECKPOINT_PATH``).
        cuda_device: forwarded to every spawned server (EGL / torch device).
        transport: RPC transport of spawned servers (``socket`` default: the lower per-step
            overhead, benchmarks/env_step_bench.py; or ``http``).
        policy_mode: ``tools`` | ``code``.
        code_file: run this Python file as the policy (code mode without an LLM).
        code_timeout_s, code_max_calls: per-cell limits in code mode.
        record_trajectory: write ``trajectories/<task_id>/`` (recording issue).
        record_observations: ``"vla"`` (default: only VLA actions carry their policy images) or
            ``"all"`` (every executed action, scripted too: what the flywheel's rule set v2 exports;
            costs one two-camera render per scripted step, see docs/results/flywheel.md).
        policy_image_size: edge (pixels) of the square main/wrist policy images the LIBERO env
            server renders (``--policy-image-size``): VLA queries and recorded observations (default
            256, LIBERO's).
        require_operator_verdict: ``finish`` refused until an operator verdict exists.
        video: write ``episode.mp4``.
        step_images: when the LIBERO toolkit renders a step's camera images (``--step-images``):
            ``"every_step"`` (after every motion tool), ``"on_demand"`` (state-only steps; the
            latest step's cameras rendered when a tool reads them, and at ``finish``) or ``"auto"``
            (default: on demand for the ``scripted`` and ``flash`` planners, which read state,
            not images; every step for LLM planners and code mode, whose results carry images).
            See :mod:`rpent.robots.libero.toolkit`.
        robot: robot package (``libero``, ``metaworld``; :mod:`rpent.robots.registry`).
        env_python: interpreter of a spawned env server (``--env-python``); None = the robot's
            default (Meta-World: ``.venv-metaworld/bin/python``; LIBERO: this interpreter).
        user_message: replaces the rendered first user message (the operator edited it, ``-i``).
        memory_dir: task-memory root (``--memory-dir``): the planner prompt gets ``MEMORY.md``
            and the relevant leaves of ``<memory_dir>/<robot>/`` (read-only, manifest-checked;
            :mod:`rpent.memory.context`); None = no memory. Code mode ignores it.
        argv: the command line recorded in the run's provenance (None: this process's ``sys.argv``).
    """

    suite: str
    task: int
    seed: int = 0
    libero_type: str | None = None
    max_episode_steps: int = 10000
    planner: str = "scripted"
    planner_config: PlannerConfig = field(default_factory=PlannerConfig)
    output_dir: str | Path | None = None
    env_endpoint: str | None = None
    vla_endpoint: str | None = None
    sam3_endpoint: str | None = None
    vla_model_path: str | None = None
    sam3_checkpoint: str | None = None
    cuda_device: int | None = None
    transport: str = "socket"
    policy_mode: str = "tools"
    code_file: str | None = None
    code_timeout_s: float = 120.0
    code_max_calls: int = 100
    record_trajectory: bool = False
    record_observations: str = "vla"
    policy_image_size: int = 256
    require_operator_verdict: bool = False
    video: bool = True
    step_images: str = "auto"
    robot: str = "libero"
    env_python: str | None = None
    user_message: str | None = None
    memory_dir: str | Path | None = None
    argv: list[str] | None = None

    def resolved_step_images(self) -> str:
        """The toolkit capture mode ``step_images`` stands for: ``"every_step"`` or ``"on_demand"``.

        Raises:
            ValueError: an unknown ``step_images`` value.
        """
        mode = self.step_images.replace("-", "_")
        if mode == "auto":
            planner_reads_images = self.planner not in ("scripted", "flash") or self.policy_mode == "code"
            return "every_step" if planner_reads_images else "on_demand"
        if mode not in ("every_step", "on_demand"):
            raise ValueError(f"--step-images must be auto, every-step or on-demand, got {self.step_images!r}")
        return mode

    @property
    def recorded_planner(self) -> str:
        """The planner the run's records name: ``"code_file"`` for a ``--code-file`` run (the file
        runs as the policy; no planner is created), else :attr:`planner`."""
        return "code_file" if self.code_file else self.planner

    def resolved_vla_model_path(self) -> str | None:
        """``vla_model_path`` or ``$PI05_CHECKPOINT_PATH`` (None when neither is set)."""
        return self.vla_model_path or os.environ.get("PI05_CHECKPOINT_PATH") or None

    def resolved_sam3_checkpoint(self) -> str | None:
        """``sam3_checkpoint`` or ``$SAM3_CHECKPOINT_PATH``."""
        return self.sam3_checkpoint or os.environ.get("SAM3_CHECKPOINT_PATH") or None


@dataclass
class RunOutcome:
    """How a run ended.

    Attributes:
        environment_success: the env's own success predicate at the end (never the finish claim);
            None when it was never read (the run stopped before the environment was read) or could
            not be read (the env server died): unknown, never a stale or assumed value.
        environment_success_unknown: why ``environment_success`` is None (one line), else None.
        finish: ``{"status", "summary"}`` of an accepted finish, or None.
        error: one-line error, or None.
        error_kind: the class of ``error`` the planner reported
            (:attr:`rpent.planners.base.PlannerResult.error_kind`: ``policy_code`` when a
            ``--code-file`` policy's own code raised, ``network``, ``auth``, ...), else None.
        stop_reason: the planner's stop reason (``finished``, ``max_turns``, ``timeout``, ...),
            or ``error`` / ``cancelled``.
        output_dir: the run directory.
        stats: planner stats (turns, tool calls, tokens, requests, elapsed_s).
        env_steps: env steps executed.
        operator_verdict: the operator's last final verdict ``{"answer", "notes", "time",
            "asked_by", "request_id", "question", "evidence_step"}`` or None.
        verdict_required: ``finish`` needed an operator verdict (``--require-operator-verdict``).
        label: :func:`run_label` (empty until the run layer finalised the outcome).
        disagreement: :func:`verdict_disagreement` note, or None.
        stopped_during: what the run was doing when it stopped on an error or a cancellation
            (``starting env_server``, ``reaching env_server at socket://...``, ``running the
            planner``, ...), else None.
        environment_unstable: where the simulation blew up during the episode
            (``LiberoSim.instability``: ``env_step``, ``warning``, ``dof``, ``joint``, ``body``,
            ``detail``), else None. The predicate is still what the environment reports; this says
            the scene it was read from is not the init state's.
    """

    environment_success: bool | None = None
    finish: dict | None = None
    error: str | None = None
    error_kind: str | None = None
    stop_reason: str = "error"
    output_dir: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    env_steps: int = 0
    operator_verdict: dict | None = None
    verdict_required: bool = False
    label: str = ""
    disagreement: str | None = None
    environment_success_unknown: str | None = None
    stopped_during: str | None = None
    environment_unstable: dict | None = None

    @property
    def exit_code(self) -> int:
        """:data:`EXIT_SUCCESS` (label ``succeeded``; before labelling: the env predicate) /
        :data:`EXIT_TASK_FAILED` (``failed``, ``aborted``) / :data:`EXIT_ERROR` (``error``,
        ``cancelled``: a signal, ``/quit``, an operator stop)."""
        if self.label:
            if self.label == "succeeded":
                return EXIT_SUCCESS
            return EXIT_ERROR if self.label in ("error", "cancelled") else EXIT_TASK_FAILED
        if self.environment_success:
            return EXIT_SUCCESS
        return EXIT_ERROR if self.error and self.stop_reason in ("error", "service_error") else EXIT_TASK_FAILED

    def to_dict(self) -> dict:
        """JSON-able dict."""
        return asdict(self)
