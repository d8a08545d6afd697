"""Parsing of the Run screen's input line: ``/rpent-task <suite> <task> <seed>`` (or
``/rpent-task --suite S --task T --seed N``) or a steering message.

Command grammar and error wording follow the upstream Dashboard (its "Commands" section): "unknown Dashboard command", "expected <usage>", "unsupported suite",
"must be an integer"; each message here also says how to fix the input. Suite names come from
``rpent.robots.libero.suites`` when that module is importable, else from the suite list of the
reference (§2.2 ``--suite``); for another robot (``metaworld``) from its registry adapter
(:mod:`rpent.robots.registry`: ``suite_names``, ``task_names``, ``resolve_task``), every function
taking the session's ``robot``.
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
    "TASK_FLAGS_USAGE",
    "task_names",
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
#: The flag form (suite defaults to the robot's default suite, seed to 0).
TASK_FLAGS_USAGE = f"{TASK_COMMAND} --suite <suite> --task <task> [--seed <seed>]"
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
    """``/rpent-task`` arguments: ``suite`` name of the session's robot (``libero_goal``, ``mt10``), ``task``
    index (>= 0) in that suite, ``seed`` (init state id / Meta-World episode seed, >= 0)."""

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


def _adapter(robot: str):
    """The registry adapter of a robot other than LIBERO (None for ``libero``, whose suite tables come
    from ``rpent.robots.libero.suites`` as before).

    Raises:
        CommandError: unknown robot (lists the registered ones).
    """
    if robot == "libero":
        return None
    from rpent.robots.registry import get_robot

    try:
        return get_robot(robot)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def known_suites(robot: str = "libero") -> tuple[str, ...]:
    """Suite names accepted by ``/rpent-task`` for ``robot``, sorted (cached: scanning LIBERO's takes
    ~1 s idle, much more on a busy machine; concurrent callers wait for the one scan instead of
    repeating it).

    Source: for ``libero``, ``rpent.robots.libero.suites.list_suites()`` (suites with ready tasks under
    the environment's ``LIBERO_TYPE``) when importable, else the reference's list; for another robot,
    its registry adapter's ``suite_names()`` (``mt10``, ``mt50`` for ``metaworld``).
    """
    adapter = _adapter(robot)
    if adapter is not None:
        return tuple(sorted(adapter.suite_names()))
    with _SCAN_LOCK:
        return _scan_suites()


def suites_ready(robot: str = "libero") -> bool:
    """True once the suite list is scanned (``known_suites`` then answers at once); other robots'
    suite lists are static data, always ready."""
    return robot != "libero" or _scan_suites.cache_info().currsize > 0


def warm_up(robot: str = "libero") -> threading.Thread:
    """Scan the suite list in a daemon thread (so the first ``/rpent-task`` completion or parse
    does not wait for it on the UI thread); returns the started thread."""
    thread = threading.Thread(target=known_suites, args=(robot,), name="rpent-suite-scan", daemon=True)
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


def task_names(suite: str, robot: str = "libero") -> tuple[str, ...] | None:
    """Task names of ``suite`` in index order for a robot whose tasks have names (``metaworld``:
    ``reach-v3`` ...); None for LIBERO (tasks are indices) or an unknown suite."""
    adapter = _adapter(robot)
    if adapter is None or not callable(getattr(adapter, "task_names", None)):
        return None
    try:
        return tuple(adapter.task_names(suite))
    except ValueError:
        return None


def task_count(suite: str, robot: str = "libero") -> int | None:
    """Number of tasks in ``suite`` (None when unknown): LIBERO's from
    ``rpent.robots.libero.suites.suite_info``, another robot's from its adapter's ``task_names``."""
    if robot != "libero":
        names = task_names(suite, robot)
        return None if names is None else len(names)
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
    if name == "seed":
        from rpent.run.config import SEED_MAX

        if value > SEED_MAX:
            raise CommandError(f"seed must be in 0..{SEED_MAX} (2**63 - 1), got {value}; usage: {TASK_USAGE}")
    return value


def _flag_args(args: list[str], robot: str) -> tuple[str, str, str]:
    """``--suite S --task T --seed N`` (also ``--suite=S``) -> ``(suite, task, seed)`` texts; the suite
    defaults to the robot's ``default_suite`` (none for LIBERO), the seed to 0."""
    values: dict[str, str] = {}
    i = 0
    while i < len(args):
        word = args[i]
        key, eq, value = word.partition("=")
        if key not in ("--suite", "--task", "--seed"):
            raise CommandError(f"unknown option {word!r}; usage: {TASK_USAGE} or {TASK_FLAGS_USAGE}")
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise CommandError(f"{key} needs a value; usage: {TASK_FLAGS_USAGE}")
            value, i = args[i + 1], i + 1
        values[key[2:]] = value
        i += 1
    if "task" not in values:
        raise CommandError(f"--task is required; usage: {TASK_FLAGS_USAGE}")
    adapter = _adapter(robot)
    suite = values.get("suite") or (getattr(adapter, "default_suite", None) if adapter is not None else None)
    if not suite:
        raise CommandError(f"--suite is required for --robot {robot}; usage: {TASK_FLAGS_USAGE}")
    return suite, values["task"], values.get("seed", "0")


def parse_task_command(line: str, robot: str = "libero") -> TaskCommand:
    """Parse ``/rpent-task <suite> <task> <seed>`` or ``/rpent-task --suite S --task T [--seed N]``
    for the session's ``robot`` (registry name). ``task`` is an index; a robot whose tasks have
    names (``metaworld``) also takes the name (``pick-place-v3``, or without ``-v3``), resolved by its
    adapter to the index. Flag form: the suite defaults to the robot's default suite, the seed to 0.

    Raises:
        CommandError: unknown command, wrong argument count ("expected /rpent-task <suite> <task> <seed>"),
            unknown option, unsupported suite (lists the known ones), an unknown task name, or a
            non-integer / negative / out-of-range task or seed.
    """
    parts = line.split()
    if not parts or parts[0] != TASK_COMMAND:
        name = parts[0] if parts else line
        raise CommandError(f"unknown Dashboard command {name!r}; available: {TASK_USAGE}")
    args = parts[1:]
    if any(a.startswith("--") for a in args):
        suite, task_text, seed_text = _flag_args(args, robot)
    elif len(args) != 3:
        raise CommandError(f"expected {TASK_USAGE} (got {len(args)} argument(s)); or {TASK_FLAGS_USAGE}")
    else:
        suite, task_text, seed_text = args
    adapter = _adapter(robot)
    if adapter is not None:
        if suite not in (suites := known_suites(robot)):
            raise CommandError(f"unsupported suite {suite!r} for --robot {robot}; known suites: {', '.join(suites)}")
        names = task_names(suite, robot)
        if names is not None and not task_text.isdigit():
            try:
                suite, task = adapter.resolve_task(suite, task_text)
            except ValueError as exc:
                raise CommandError(f"{exc}; usage: {TASK_USAGE}") from None
            return TaskCommand(suite=suite, task=task, seed=_int_field("seed", seed_text))
    elif not _quick_suite_ok(suite) and suite not in (suites := known_suites()):
        raise CommandError(f"unsupported suite {suite!r}; known suites: {', '.join(suites)}")
    task = _int_field("task", task_text)
    count = task_count(suite, robot)
    if count is not None and task >= count:
        raise CommandError(f"task must be an integer in 0..{count - 1} for {suite}, got {task}")
    return TaskCommand(suite=suite, task=task, seed=_int_field("seed", seed_text))


def parse_input(line: str, robot: str = "libero") -> TaskCommand | SteerMessage:
    """Classify an input line: a ``/command`` is parsed (``/rpent-task`` for the session's ``robot``,
    see :func:`parse_task_command`), anything else is a steering message.

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
        return parse_task_command(text, robot)
    return SteerMessage(text)


def completions(prefix: str, robot: str = "libero") -> list[str]:
    """Full-line completions for the input box (used as suggestions), in a stable order.

    ``"/rp"`` -> ``["/rpent-task "]``; ``"/rpent-task libero_g"`` -> every matching suite of
    ``robot``; after a suite, the task names (``metaworld``) or indices when the suite's task count
    is known.
    """
    if not prefix.startswith("/"):
        return []
    if not prefix.startswith(TASK_COMMAND + " "):
        return [c for c in (TASK_COMMAND + " ",) + STEERING_COMMANDS if c.startswith(prefix)]
    rest = prefix[len(TASK_COMMAND) + 1:]
    words = rest.split(" ")
    if len(words) == 1:
        return [f"{TASK_COMMAND} {s} " for s in known_suites(robot) if s.startswith(words[0])]
    if len(words) == 2:
        names = task_names(words[0], robot)
        if names is not None and words[1] and not words[1].isdigit():
            return [f"{TASK_COMMAND} {words[0]} {n} 0" for n in names if n.startswith(words[1])]
        count = task_count(words[0], robot)
        if count is None:
            return []
        return [f"{TASK_COMMAND} {words[0]} {t} 0" for t in range(count) if str(t).startswith(words[1])]
    return []
