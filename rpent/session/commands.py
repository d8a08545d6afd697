"""Parsing of the Run screen's input line: ``/rpent-task <suite> <task> <seed>`` or a steering message.

Command grammar and error wording follow the upstream Dashboard (``shared/reference/rpent_reference.md``
§7 "Commands"): "unknown Dashboard command", "expected <usage>", "unsupported suite",
"must be an integer"; each message here also says how to fix the input. Suite names come from
``rpent.robots.libero.suites`` when that module is importable, else from the suite list of the
reference (§2.2 ``--suite``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "TaskCommand",
    "SteerMessage",
    "CommandError",
    "TASK_COMMAND",
    "TASK_USAGE",
    "STEERING_COMMANDS",
    "parse_input",
    "parse_task_command",
    "known_suites",
    "task_count",
    "completions",
    "warm_up",
    "suites_ready",
]

TASK_COMMAND = "/rpent-task"
TASK_USAGE = f"{TASK_COMMAND} <suite> <task> <seed>"
#: Commands handled by the planner's ``Steering.submit`` (rpent.planners.steering).
STEERING_COMMANDS = ("/interrupt", "/quit", "/help")

#: Fallback suites (reference §2.2): libero_{spatial,object,goal,10,90} and the LIBERO-PRO
#: perturbations libero_{spatial,object,goal,10}_{task,swap,lan}.
_FALLBACK_SUITES = tuple(
    [f"libero_{s}" for s in ("spatial", "object", "goal", "10", "90")]
    + [f"libero_{s}_{p}" for s in ("spatial", "object", "goal", "10") for p in ("task", "swap", "lan")]
)


class CommandError(ValueError):
    """The input line is a malformed command; the message says what is wrong and the usage."""


@dataclass(frozen=True)
class TaskCommand:
    """``/rpent-task`` arguments: LIBERO ``suite`` name, ``task`` index (>= 0), ``seed`` (init state id, >= 0)."""

    suite: str
    task: int
    seed: int

    @property
    def slug(self) -> str:
        """Directory slug ``<suite>_t<task>_s<seed>`` (TaskRun dirs are ``NNNN_<slug>``)."""
        return f"{self.suite}_t{self.task}_s{self.seed}"

    def display(self) -> str:
        """Human form used in control feedback: ``libero_goal task 3 seed 0``."""
        return f"{self.suite} task {self.task} seed {self.seed}"


@dataclass(frozen=True)
class SteerMessage:
    """Plain text for the planner, delivered at its next turn boundary."""

    text: str


@lru_cache(maxsize=1)
def _suites_module():
    try:
        from rpent.robots.libero import suites  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - optional: the robot package may be absent or broken here
        return None
    return suites


_SCAN_LOCK = threading.Lock()


def known_suites() -> tuple[str, ...]:
    """Suite names accepted by ``/rpent-task``, sorted (cached: scanning takes ~1 s idle, much more
    on a busy machine; concurrent callers wait for the one scan instead of repeating it).

    Source: ``rpent.robots.libero.suites.list_suites()`` (suites with ready tasks under the
    environment's ``LIBERO_TYPE``) when importable, else the reference's list.
    """
    with _SCAN_LOCK:
        return _scan_suites()


def suites_ready() -> bool:
    """True once the suite list is scanned (``known_suites`` then answers at once)."""
    return _scan_suites.cache_info().currsize > 0


def warm_up() -> threading.Thread:
    """Scan the suite list in a daemon thread (so the first ``/rpent-task`` completion or parse
    does not wait for it on the UI thread); returns the started thread."""
    thread = threading.Thread(target=known_suites, name="rpent-suite-scan", daemon=True)
    thread.start()
    return thread


@lru_cache(maxsize=1)
def _scan_suites() -> tuple[str, ...]:
    mod = _suites_module()
    if mod is not None and callable(getattr(mod, "list_suites", None)):
        try:
            return tuple(sorted(str(getattr(s, "name", s)) for s in mod.list_suites()))
        except Exception:  # noqa: BLE001 - a broken LIBERO install: fall back to the static list
            pass
    return tuple(sorted(_FALLBACK_SUITES))


def task_count(suite: str) -> int | None:
    """Number of tasks in ``suite`` from ``rpent.robots.libero.suites.suite_info`` (None when unknown)."""
    mod = _suites_module()
    if mod is None or not callable(getattr(mod, "suite_info", None)):
        return None
    try:
        return int(mod.suite_info(suite).n_tasks)
    except Exception:  # noqa: BLE001 - unknown suite or API shape: no completion data
        return None


def _quick_suite_ok(suite: str) -> bool:
    """True when ``suite`` is known to be usable without the full registry scan: from the scan's
    cache when it is done, else by scanning this one suite (``suite_info``), so that Enter on a
    valid command never waits for the whole scan on the UI thread."""
    if suites_ready():
        return suite in known_suites()
    mod = _suites_module()
    if mod is None or not callable(getattr(mod, "suite_info", None)):
        return False
    try:
        mod.suite_info(suite)
    except Exception:  # noqa: BLE001 - unknown or unusable suite: the caller's full check words the error
        return False
    return True


def _int_field(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise CommandError(f"{name} must be an integer, got {text!r}; usage: {TASK_USAGE}") from None
    if value < 0:
        raise CommandError(f"{name} must be an integer >= 0, got {value}; usage: {TASK_USAGE}")
    return value


def parse_task_command(line: str) -> TaskCommand:
    """Parse ``/rpent-task <suite> <task> <seed>``.

    Raises:
        CommandError: unknown command, wrong argument count ("expected /rpent-task <suite> <task> <seed>"),
            unsupported suite (lists the known ones), or a non-integer / negative task or seed.
    """
    parts = line.split()
    if not parts or parts[0] != TASK_COMMAND:
        name = parts[0] if parts else line
        raise CommandError(f"unknown Dashboard command {name!r}; available: {TASK_USAGE}")
    args = parts[1:]
    if len(args) != 3:
        raise CommandError(f"expected {TASK_USAGE} (got {len(args)} argument(s))")
    suite, task_text, seed_text = args
    if not _quick_suite_ok(suite) and suite not in (suites := known_suites()):
        raise CommandError(f"unsupported suite {suite!r}; known suites: {', '.join(suites)}")
    task = _int_field("task", task_text)
    count = task_count(suite)
    if count is not None and task >= count:
        raise CommandError(f"task must be an integer in 0..{count - 1} for {suite}, got {task}")
    return TaskCommand(suite=suite, task=task, seed=_int_field("seed", seed_text))


def parse_input(line: str) -> TaskCommand | SteerMessage:
    """Classify an input line: a ``/command`` is parsed, anything else is a steering message.

    Raises:
        CommandError: for a malformed or unknown ``/command``, or an empty line.
    """
    text = line.strip()
    if not text:
        raise CommandError(f"empty input; type a message for the planner or {TASK_USAGE}")
    if text.startswith("/"):
        if text.split()[0] in STEERING_COMMANDS:
            return SteerMessage(text)
        if text.split()[0] != TASK_COMMAND:
            raise CommandError(f"unknown Dashboard command {text.split()[0]!r}; available: {TASK_USAGE}, "
                               + ", ".join(STEERING_COMMANDS))
        return parse_task_command(text)
    return SteerMessage(text)


def completions(prefix: str) -> list[str]:
    """Full-line completions for the input box (used as suggestions), in a stable order.

    ``"/rp"`` -> ``["/rpent-task "]``; ``"/rpent-task libero_g"`` -> every matching suite;
    after a suite, the task indices when the suite's task count is known.
    """
    if not prefix.startswith("/"):
        return []
    if not prefix.startswith(TASK_COMMAND + " "):
        return [c for c in (TASK_COMMAND + " ",) + STEERING_COMMANDS if c.startswith(prefix)]
    rest = prefix[len(TASK_COMMAND) + 1:]
    words = rest.split(" ")
    if len(words) == 1:
        return [f"{TASK_COMMAND} {s} " for s in known_suites() if s.startswith(words[0])]
    if len(words) == 2:
        count = task_count(words[0])
        if count is None:
            return []
        return [f"{TASK_COMMAND} {words[0]} {t} 0" for t in range(count) if str(t).startswith(words[1])]
    return []
