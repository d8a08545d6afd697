"""Checks of the run record next to a trajectory record (``rpent-flywheel validate``).

A run's output directory holds the run layer's record (:mod:`rpent.run.record`:
``transcript_<tag>.json``, written once at the end, also on errors, and ``states.json``, the step
manifest) and, with ``--record-trajectory``, the trajectory record
``trajectories/<task_id>/``. The export reads only the trajectory record, so a damaged or
mismatched run record would otherwise go unnoticed. Checks, each named in the findings
(``check``):

- ``transcript``: ``transcript_<tag>.json`` (``tag`` = :func:`rpent.run.record.run_tag` of the
  record's suite, task, seed) exists, is a JSON object with the run layer's fields and types
  (``suite``, ``task``, ``seed``, ``task_language``, ``planner``, ``environment_success``,
  ``env_steps``, ``stop_reason``, ``error``, ``label``, ``stats``, ``messages``), and agrees with
  ``task.json`` (suite, task, seed, task language, planner, init state hash, environment success,
  label)
  and with the record's last action (``env_steps`` = its ``step`` + 1).
- ``states``: ``states.json`` is a JSON object with ``schema_version`` 1, an ``episode`` of the
  same suite/task/seed and ``steps`` numbered 0, 1, 2, ...; its last step's ``env_steps`` equals
  the transcript's, and a successful transcript has a step with ``success: true``.

A record whose directory is not ``<run>/trajectories/<task_id>`` or whose run directory holds
neither file (a record copied on its own) gets no run checks (``run`` is then null in the
findings). Run directories without a trajectory record are found by :func:`scan_run_dirs`: one
with a transcript is reported by :func:`unrecorded_run_problems`; one with a run's
``states.json`` (``schema_version`` 1) but no transcript, a run that never ended (killed, or
still running), by :func:`unended_run_problems`. A directory whose ``states.json`` is not a run's
is not a run. Everything is only read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rpent.recording import layout

STATES_JSON = "states.json"
TRANSCRIPT_GLOB = "transcript_*.json"

_TRANSCRIPT_FIELDS: dict[str, tuple[type, ...]] = {
    "suite": (str,),
    "task": (int,),
    "seed": (int,),
    "task_language": (str,),
    "planner": (str,),
    "environment_success": (bool, type(None)),
    "env_steps": (int,),
    "stop_reason": (str, type(None)),
    "error": (str, type(None)),
    "label": (str,),
    "stats": (dict,),
    "messages": (list,),
}
"""Fields every transcript has (:func:`rpent.run.runner` writes them) and their JSON types."""

_AGREE_WITH_TASK = ("suite", "task", "seed", "task_language", "planner", "init_state_sha256", "environment_success",
                    "label")
"""Transcript fields that must equal ``task.json``'s (when both have them)."""


_JSON_NAMES = {str: "string", int: "integer", bool: "boolean", dict: "object", list: "array", float: "number",
               type(None): "null"}


def _tname(v) -> str:
    return _JSON_NAMES.get(type(v), type(v).__name__)


def run_dir_of(record_dir: Path) -> Path | None:
    """The run directory of a record at ``<run>/trajectories/<task_id>``, if it holds a run record.

    Returns:
        ``<run>`` when the record's parent is ``trajectories`` and ``<run>`` holds ``states.json``
        or a ``transcript_*.json``; else None.
    """
    rd = Path(record_dir)
    if rd.parent.name != layout.TRAJECTORIES_DIRNAME:
        return None
    run = rd.parent.parent
    if (run / STATES_JSON).is_file() or any(run.glob(TRANSCRIPT_GLOB)):
        return run
    return None


def _load_json(path: Path) -> tuple[object, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except UnicodeDecodeError as e:
        return None, f"{path.name} is not UTF-8 text ({e.reason} at byte {e.start})"
    except json.JSONDecodeError as e:
        return None, f"{path.name} is not JSON ({e.msg} at line {e.lineno} column {e.colno}): truncated or corrupt"


def check_run_record(run_dir: Path, task: dict | None, actions: list[dict]) -> list[tuple[str, str]]:
    """Check ``run_dir``'s transcript and ``states.json`` against the trajectory record (read-only).

    Args:
        run_dir: the run's output directory.
        task: the record's ``task.json`` (None when unreadable: only the files' own form is checked).
        actions: the record's well-formed action lines (dicts with ``seq``, ``step``, ...), in order.

    Returns:
        ``[(check, detail)]``, ``check`` in ``("transcript", "states")``; empty when sound.

    Raises:
        OSError: a file exists but cannot be read.
    """
    from rpent.run.record import run_tag

    problems: list[tuple[str, str]] = []
    task = task or {}
    tag = None
    if isinstance(task.get("suite"), str) and isinstance(task.get("task"), int) and isinstance(task.get("seed"), int):
        tag = run_tag(task["suite"], task["task"], task["seed"])

    # transcript
    transcript: dict | None = None
    if tag is not None:
        path = run_dir / f"transcript_{tag}.json"
    else:
        found = sorted(run_dir.glob(TRANSCRIPT_GLOB))
        path = found[0] if len(found) == 1 else run_dir / "transcript_<tag>.json"
    if not path.is_file():
        others = sorted(p.name for p in run_dir.glob(TRANSCRIPT_GLOB))
        problems.append(("transcript", f"{path.name} is missing (the run never ended, or was killed)"
                         + (f"; found {', '.join(others)} instead (a run of another suite/task/seed?)" if others else "")))
    else:
        doc, err = _load_json(path)
        if err:
            problems.append(("transcript", err))
        elif not isinstance(doc, dict):
            problems.append(("transcript", f"{path.name} holds a JSON {_tname(doc)}, not an object"))
        else:
            transcript = doc
            for key, types in _TRANSCRIPT_FIELDS.items():
                if key not in doc:
                    problems.append(("transcript", f"{path.name}: field {key!r} is missing"))
                elif not isinstance(doc[key], types) or (bool not in types and isinstance(doc[key], bool)):
                    problems.append(("transcript", f"{path.name}: {key} is {_tname(doc[key])} "
                                                   f"{doc[key]!r:.60}, expected {' or '.join(_JSON_NAMES[t] for t in types)}"))
            for key in _AGREE_WITH_TASK:
                if key in doc and key in task and doc[key] != task[key]:
                    problems.append(("transcript", f"{path.name}: {key} {doc[key]!r:.80} but task.json has {task[key]!r:.80}"))
            steps = doc.get("env_steps")
            if isinstance(steps, int) and not isinstance(steps, bool) and actions:
                last = actions[-1]
                if steps != last["step"] + 1:
                    problems.append(("transcript", f"{path.name}: env_steps {steps} but the record's last action "
                                                   f"(seq {last['seq']}) is env step {last['step']} (expected "
                                                   f"{last['step'] + 1}): actions missing from the record or from the run"))
            elif isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
                problems.append(("transcript", f"{path.name}: env_steps {steps} but the record has no readable action: "
                                               "actions missing from the record (actions.jsonl emptied or unreadable)"))

    # states.json
    spath = run_dir / STATES_JSON
    if not spath.is_file():
        problems.append(("states", f"{STATES_JSON} is missing"))
        return problems
    doc, err = _load_json(spath)
    if err:
        problems.append(("states", err))
        return problems
    if not isinstance(doc, dict):
        problems.append(("states", f"{STATES_JSON} holds a JSON {_tname(doc)}, not an object"))
        return problems
    if doc.get("schema_version") != 1:
        problems.append(("states", f"{STATES_JSON}: schema_version {doc.get('schema_version')!r}, expected 1"))
    ep = doc.get("episode")
    if not isinstance(ep, dict):
        problems.append(("states", f"{STATES_JSON}: episode is {_tname(ep)}, expected an object"))
    else:
        for key in ("suite", "task", "seed"):
            if key in task and ep.get(key) != task[key]:
                problems.append(("states", f"{STATES_JSON}: episode {key} {ep.get(key)!r} but task.json has {task[key]!r}"))
    if tag is not None and "tag" in doc and doc["tag"] != tag:
        problems.append(("states", f"{STATES_JSON}: tag {doc['tag']!r}, expected {tag!r}"))
    steps = doc.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        problems.append(("states", f"{STATES_JSON}: steps is not a list of objects"))
        return problems
    bad_idx = [i for i, s in enumerate(steps) if s.get("step_idx") != i]
    if bad_idx:
        i = bad_idx[0]
        problems.append(("states", f"{STATES_JSON}: step {i} has step_idx {steps[i].get('step_idx')!r} "
                                   f"(steps must be numbered 0, 1, 2, ...; {len(bad_idx)} misnumbered)"))
    if transcript is not None and steps:
        last_env = steps[-1].get("env_steps")
        if isinstance(transcript.get("env_steps"), int) and last_env != transcript["env_steps"]:
            problems.append(("states", f"{STATES_JSON}: last step has env_steps {last_env!r}, the transcript "
                                       f"{transcript['env_steps']}"))
        if transcript.get("environment_success") is True and not any(s.get("success") is True for s in steps):
            problems.append(("states", f"{STATES_JSON}: the transcript says environment_success true but no step "
                                       "has success true"))
    return problems


def scan_run_dirs(root: Path) -> tuple[set[Path], set[Path]]:
    """Directories at or below ``root`` holding a ``transcript_*.json``, and those holding a
    ``states.json``, in one walk (hidden directories, symlinked ones and ``trajectories/`` are skipped).

    Returns:
        ``(with_transcript, with_states)``.
    """
    root = Path(root)
    with_transcript: set[Path] = set()
    with_states: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != layout.TRAJECTORIES_DIRNAME
                       and not (here / d).is_symlink()]
        if STATES_JSON in filenames:
            with_states.add(here)
        if any(f.startswith("transcript_") and f.endswith(".json") for f in filenames):
            with_transcript.add(here)
    return with_transcript, with_states


def _covered(record_dirs: list[Path]) -> set[Path]:
    return {d.parent.parent for d in record_dirs if d.parent.name == layout.TRAJECTORIES_DIRNAME}


def find_unrecorded_runs(root: Path, record_dirs: list[Path],
                         scan: tuple[set[Path], set[Path]] | None = None) -> list[Path]:
    """Run directories at or below ``root`` (holding a ``transcript_*.json``) without a trajectory record.

    ``scan``: :func:`scan_run_dirs` of ``root`` when the caller has it already.
    """
    with_transcript, _ = scan_run_dirs(root) if scan is None else scan
    covered = _covered(record_dirs)
    return sorted(r for r in with_transcript if r not in covered)


def is_run_states(path: Path) -> bool:
    """Whether ``path`` is a run's ``states.json`` (:class:`rpent.run.record.RunRecord`: a JSON
    object with ``schema_version`` 1 and a ``steps`` list)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("schema_version") == 1 and isinstance(doc.get("steps"), list)


def find_unended_runs(root: Path, record_dirs: list[Path],
                      scan: tuple[set[Path], set[Path]] | None = None) -> list[Path]:
    """Run directories at or below ``root`` with a run's ``states.json`` but neither a
    ``transcript_*.json`` nor a trajectory record: runs that never ended (killed before writing
    their transcript, or still running). A run with a trajectory record is checked with it
    (:func:`check_run_record` names the missing transcript).

    ``scan``: :func:`scan_run_dirs` of ``root`` when the caller has it already.
    """
    with_transcript, with_states = scan_run_dirs(root) if scan is None else scan
    covered = _covered(record_dirs)
    return sorted(r for r in with_states - with_transcript - covered if is_run_states(r / STATES_JSON))


#: The finding for a run that never ended, with what to do about it.
UNENDED_RUN = ("run never ended: no transcript (killed?); exports skip it: run the task again, and delete "
               "this directory once no run is writing it")


def unended_run_problems(run_dir: Path) -> list[tuple[str, str]]:
    """The finding for a run directory with a ``states.json`` but no transcript and no trajectory record."""
    return [("transcript", UNENDED_RUN)]


def unrecorded_run_problems(run_dir: Path) -> list[tuple[str, str]]:
    """The finding for a run directory that has a run record but no trajectory record."""
    has = (run_dir / layout.TRAJECTORIES_DIRNAME).is_dir()
    return [("files", (f"{layout.TRAJECTORIES_DIRNAME}/ holds no trajectory record" if has else
                       f"no {layout.TRAJECTORIES_DIRNAME}/ record")
             + ": the run was not recorded with --record-trajectory (nothing to export)")]
