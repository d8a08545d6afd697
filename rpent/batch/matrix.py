"""The experiment matrix: arms x suites x tasks x seeds x repeats, its cells and their keys.

An **arm** is one variant of the system under test (planner / model / VLA checkpoint / policy
mode / extra ``rpent`` flags); a **cell** is one (suite, task, seed, repeat) episode of one arm.
Every arm runs the same cells. The matrix comes from ``rpent-batch`` flags (one arm, named
``default`` unless ``--arm-name``) or a YAML file::

    suites: [libero_goal_swap]
    tasks: 0-9            # "0-9", "0,2,5-7", an int or a list
    seeds: 25-34
    repeats: 1            # episodes per (task, seed); repeat r is the same init state again
    flags: [--max-episode-steps, "600"]   # rpent flags shared by every arm
    arms:
      - name: before
        planner: api
        model: anthropic:claude-sonnet-4-5
        vla_checkpoint: /ckpt/pi05-before    # a VLA server is started once for this arm
      - name: after
        planner: api
        model: anthropic:claude-sonnet-4-5
        vla_checkpoint: /ckpt/pi05-after
        flags: [--reasoning-effort, low]

An arm may run a subset of the seeds (``seeds: 1-9``: those of them the matrix has), replay flash plans made from another arm's
solved runs (``planner: flash`` with ``flash_from: <arm>``: before its cells run, the runner turns
the source arm's solved ``flash_seed`` run of each task into a plan with ``rpent-flash generate``,
see ``rpent.batch.flash_plans``; ``share_env: true`` replays a task's cells on one env server),
and be ``optional``: it runs only when enabled
(``rpent-batch --enable-arm NAME``), e.g. an LLM planner that needs an API key. ``note`` is free
text shown next to the arm in reports and on the leaderboard page.

Cell key: ``<arm>/<suite>/t<task>/s<seed>/r<repeat>`` (stable; used in the ledger, the report
and the executor). A results root is frozen to its matrix (``matrix.json``): resuming with a
different matrix is refused.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rpent.run.config import SEED_MAX

__all__ = ["Arm", "Cell", "Matrix", "parse_index_list", "format_index_list", "load_matrix_file", "select_arms",
           "extend_matrix",
           "ARM_KEYS", "RESERVED_RUN_FLAGS"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

#: Arm fields accepted in a YAML matrix file.
ARM_KEYS = ("name", "planner", "model", "policy_mode", "code_file", "vla_checkpoint", "vla_endpoint",
            "sam3_checkpoint", "sam3_endpoint", "flags", "price_in_usd_per_mtok", "price_out_usd_per_mtok",
            "seeds", "flash_from", "flash_seed", "share_env", "optional", "note")

#: ``rpent`` flags the batch sets itself per cell / per arm; refused in pass-through flags.
RESERVED_RUN_FLAGS = ("--suite", "--task", "--seed", "--output-dir", "--env-endpoint", "--vla-endpoint",
                      "--sam3-endpoint", "-i", "--interactive", "--planner", "--model", "--policy-mode",
                      "--code-file")


#: Most indices one --tasks / --seeds list may name (a guard against a typo like 0-99999999999).
MAX_INDICES = 1_000_000


def format_index_list(values) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    vals = sorted(set(values))
    out, i = [], 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(out)


def parse_index_list(value: Any, what: str) -> list[int]:
    """Parse ``"0-9"``, ``"0,2,5-7"``, an int or a list of ints into a sorted unique list.

    Raises:
        ValueError: malformed text, a negative index, an empty range (names ``what``).
    """
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected indices like 0-9 or 0,2,5, got {value!r}")
    if isinstance(value, int):
        items: list[int] = [value]
    elif isinstance(value, (list, tuple)):
        items = []
        for v in value:
            items += parse_index_list(v, what)
    elif isinstance(value, str):
        items = []
        for part in value.replace(" ", "").split(","):
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
            if not m:
                raise ValueError(f"{what}: cannot read {part!r} in {value!r}; write ranges like 0-9 or lists like 0,2,5")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo:
                raise ValueError(f"{what}: range {part!r} is empty; write it low-high, e.g. 0-9")
            if hi > SEED_MAX:
                raise ValueError(f"{what}: {hi} is out of range; valid indices are 0..{SEED_MAX} (2**63 - 1)")
            if hi - lo + 1 > MAX_INDICES - len(items):
                raise ValueError(f"{what}: {value!r} names more than {MAX_INDICES} indices; a matrix is run cell by "
                                 "cell, so give the indices you mean to run")
            items += range(lo, hi + 1)
    else:
        raise ValueError(f"{what}: expected indices like 0-9 or 0,2,5, got {value!r}")
    if any(i < 0 for i in items):
        raise ValueError(f"{what}: indices must be >= 0")
    if any(i > SEED_MAX for i in items):
        raise ValueError(f"{what}: {max(items)} is out of range; valid indices are 0..{SEED_MAX} (2**63 - 1)")
    if not items:
        raise ValueError(f"{what}: no indices given")
    return sorted(set(items))


@dataclass(frozen=True)
class Arm:
    """One arm of the experiment.

    Attributes:
        name: unique arm name (letters, digits, ``_ . -``; a directory name).
        planner: ``rpent --planner`` (scripted, api, claude_code, codex).
        model: ``rpent --model`` (None: the planner's default).
        policy_mode: ``tools`` | ``code``.
        code_file: code-mode policy file (absolute path).
        vla_checkpoint: Pi0.5 checkpoint directory: one VLA server is started for the arm.
        vla_endpoint: attach this running VLA instead (``[http|socket://]HOST:PORT``).
        sam3_checkpoint, sam3_endpoint: the same for SAM3.
        flags: extra ``rpent`` flags of this arm (after the matrix's common flags).
        price_in_usd_per_mtok, price_out_usd_per_mtok: planner token prices (USD per million
            input / output tokens) for the report's cost column; None: cost only where the
            planner reports it (claude_code).
        seeds: the seeds this arm runs, of the matrix's (a matrix narrowed with ``--seeds`` keeps the
            arm's seeds that are in it); None: all of the matrix's.
        flash_from: name of an earlier arm whose solved ``flash_seed`` runs become this arm's flash
            plans (``planner`` must be ``flash``); None: a normal arm.
        flash_seed: the source arm's seed whose runs are turned into plans (default 0).
        share_env: (``planner: flash`` only) the arm's cells of one task run as one ``rpent-flash
            replay`` process on one env server, each episode still its own run record in its
            cell's attempt directory: the LIBERO environment is built once per task instead of
            once per episode (``rpent.batch.flash_plans``).
        optional: run only when enabled (``rpent-batch --enable-arm NAME``).
        note: free text about the arm (shown in reports), e.g. what its planner may read.
    """

    name: str = "default"
    planner: str = "scripted"
    model: str | None = None
    policy_mode: str = "tools"
    code_file: str | None = None
    vla_checkpoint: str | None = None
    vla_endpoint: str | None = None
    sam3_checkpoint: str | None = None
    sam3_endpoint: str | None = None
    flags: tuple[str, ...] = ()
    price_in_usd_per_mtok: float | None = None
    price_out_usd_per_mtok: float | None = None
    seeds: tuple[int, ...] | None = None
    flash_from: str | None = None
    flash_seed: int = 0
    share_env: bool = False
    optional: bool = False
    note: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"arm name {self.name!r} is not valid: use letters, digits, '_', '.', '-'")
        if self.vla_checkpoint and self.vla_endpoint:
            raise ValueError(f"arm {self.name}: give vla_checkpoint or vla_endpoint, not both")
        if self.sam3_checkpoint and self.sam3_endpoint:
            raise ValueError(f"arm {self.name}: give sam3_checkpoint or sam3_endpoint, not both")
        if not all(isinstance(f, str) for f in self.flags):
            raise ValueError(f"arm {self.name}: flags must be a list of strings, e.g. [--max-turns, '50']")
        bad = [f for f in self.flags if f.split("=", 1)[0] in RESERVED_RUN_FLAGS]
        if bad:
            raise ValueError(f"arm {self.name}: {bad[0]} is set by rpent-batch itself; use the arm's own keys "
                             "(planner, model, policy_mode, code_file, vla_*, sam3_*) instead")
        if self.seeds is not None and (not self.seeds or not all(isinstance(s, int) and s >= 0 for s in self.seeds)):
            raise ValueError(f"arm {self.name}: seeds must be a non-empty list of seeds >= 0, e.g. 1-9")
        if self.flash_from is not None:
            if self.planner != "flash":
                raise ValueError(f"arm {self.name}: flash_from needs planner: flash (got planner {self.planner!r})")
            if self.flash_from == self.name:
                raise ValueError(f"arm {self.name}: flash_from names the arm itself; name the arm whose runs "
                                 "become the plans")
            if any(f.split("=", 1)[0] == "--flash-dir" for f in self.flags):
                raise ValueError(f"arm {self.name}: --flash-dir is set by rpent-batch for a flash_from arm (its "
                                 "plans go to <results root>/flash/<arm>); remove it from the arm's flags")
        if self.share_env and self.planner != "flash":
            raise ValueError(f"arm {self.name}: share_env is for planner: flash (rpent-flash replay); got planner "
                             f"{self.planner!r}")
        if isinstance(self.flash_seed, bool) or not isinstance(self.flash_seed, int) or self.flash_seed < 0:
            raise ValueError(f"arm {self.name}: flash_seed must be a seed >= 0, got {self.flash_seed!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (flags and seeds as lists)."""
        d = asdict(self)
        d["flags"] = list(self.flags)
        d["seeds"] = None if self.seeds is None else list(self.seeds)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Arm":
        """Inverse of :meth:`to_dict` (keys missing in older ``matrix.json`` files take their defaults)."""
        seeds = d.get("seeds")
        return cls(**{**d, "flags": tuple(d.get("flags") or ()),
                      "seeds": None if seeds is None else tuple(int(s) for s in seeds)})


@dataclass(frozen=True)
class Cell:
    """One episode of one arm.

    Attributes:
        arm: arm name. suite, task, seed: the LIBERO episode (seed selects the init state).
        repeat: 0-based repeat index (same init state again).
    """

    arm: str
    suite: str
    task: int
    seed: int
    repeat: int = 0

    @property
    def key(self) -> str:
        """``<arm>/<suite>/t<task>/s<seed>/r<repeat>``."""
        return f"{self.arm}/{self.suite}/t{self.task}/s{self.seed}/r{self.repeat}"

    @property
    def dir_name(self) -> str:
        """Directory of the cell under ``runs/<arm>/``: ``<suite>_t<task>_s<seed>_r<repeat>``."""
        return f"{self.suite}_t{self.task}_s{self.seed}_r{self.repeat}"

    @classmethod
    def from_key(cls, key: str) -> "Cell":
        """Inverse of :attr:`key`. Raises ValueError on a malformed key."""
        m = re.fullmatch(r"([^/]+)/([^/]+)/t(\d+)/s(\d+)/r(\d+)", key)
        if not m:
            raise ValueError(f"bad cell key {key!r}; expected <arm>/<suite>/t<task>/s<seed>/r<repeat>")
        return cls(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)))


@dataclass(frozen=True)
class Matrix:
    """The frozen experiment matrix.

    Attributes:
        suites, tasks, seeds: episodes of every arm (tasks apply to every suite).
        repeats: episodes per (suite, task, seed) (>= 1).
        arms: the arms (names unique).
        flags: ``rpent`` flags common to every arm (before each arm's own flags).
    """

    suites: tuple[str, ...]
    tasks: tuple[int, ...]
    seeds: tuple[int, ...]
    repeats: int = 1
    arms: tuple[Arm, ...] = (Arm(),)
    flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.suites:
            raise ValueError("no suites given: pass --suites (e.g. --suites libero_goal_swap) or 'suites:' in the matrix file")
        if not self.tasks or not self.seeds:
            raise ValueError("no tasks or seeds given: pass --tasks 0-9 --seeds 25-34 (or 'tasks:'/'seeds:' in the file)")
        if self.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {self.repeats}")
        if not self.arms:
            raise ValueError("the matrix has no arms")
        names = [a.name for a in self.arms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"arm names must be unique; repeated: {', '.join(dup)}")
        bad = [f for f in self.flags if f.split("=", 1)[0] in RESERVED_RUN_FLAGS]
        if bad:
            raise ValueError(f"{bad[0]} is set by rpent-batch itself per cell or arm; remove it from the run flags")
        for i, a in enumerate(self.arms):
            if a.seeds is not None and not set(a.seeds) & set(self.seeds):
                raise ValueError(f"arm {a.name} runs none of the matrix's seeds ({format_index_list(self.seeds)}): its "
                                 f"seeds are {format_index_list(a.seeds)}")
            if a.flash_from is not None:
                earlier = [b.name for b in self.arms[:i]]
                if a.flash_from not in earlier:
                    raise ValueError(f"arm {a.name}: flash_from {a.flash_from!r} is not an arm listed before it "
                                     f"(arms before it: {', '.join(earlier) or 'none'})")
                src = self.arm(a.flash_from)
                if a.flash_seed not in self.arm_seeds(src.name):
                    raise ValueError(f"arm {a.name}: flash_seed {a.flash_seed} is not a seed of arm {src.name} "
                                     f"({format_index_list(self.arm_seeds(src.name))})")

    def arm_seeds(self, name: str) -> tuple[int, ...]:
        """The seeds arm ``name`` runs: the matrix's, or those of them in the arm's own ``seeds``."""
        a = self.arm(name)
        return tuple(s for s in self.seeds if a.seeds is None or s in a.seeds)

    def cells(self, arm: str | None = None) -> list[Cell]:
        """Every cell (of one arm, or of all arms), in arm, suite, task, seed, repeat order."""
        return [Cell(a.name, s, t, sd, r) for a in self.arms if arm is None or a.name == arm
                for s in self.suites for t in self.tasks
                for sd in self.arm_seeds(a.name) for r in range(self.repeats)]

    def arm(self, name: str) -> Arm:
        """The arm called ``name``. Raises KeyError with the known names."""
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(f"no arm {name!r}; arms: {', '.join(a.name for a in self.arms)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (``matrix.json``)."""
        return {"schema_version": 1, "suites": list(self.suites), "tasks": list(self.tasks),
                "seeds": list(self.seeds), "repeats": self.repeats, "flags": list(self.flags),
                "arms": [a.to_dict() for a in self.arms]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Matrix":
        """Inverse of :meth:`to_dict`. Raises ValueError/KeyError on a malformed document."""
        arms = tuple(Arm.from_dict(a) for a in d["arms"])
        return cls(tuple(d["suites"]), tuple(d["tasks"]), tuple(d["seeds"]), int(d["repeats"]), arms,
                   tuple(d.get("flags") or ()))


def select_arms(matrix: Matrix, enable: list[str] | tuple[str, ...] = ()) -> tuple[Matrix, list[str]]:
    """The matrix without the optional arms that are not enabled.

    Args:
        matrix: every arm of the experiment.
        enable: names of optional arms to run (``all``: every optional arm).
    Returns:
        ``(matrix of the selected arms, names of the optional arms left out)``.
    Raises:
        ValueError: an enabled name that is no arm, or a selected arm whose ``flash_from`` source
            is left out (the message names the fix).
    """
    names = [a.name for a in matrix.arms]
    wanted = set(enable)
    if "all" in wanted:
        wanted = {a.name for a in matrix.arms if a.optional}
    unknown = sorted(wanted - set(names))
    if unknown:
        optional = [a.name for a in matrix.arms if a.optional]
        raise ValueError(f"--enable-arm: no arm {', '.join(unknown)}; optional arms: {', '.join(optional) or 'none'}")
    keep = [a for a in matrix.arms if not a.optional or a.name in wanted]
    kept = {a.name for a in keep}
    for a in keep:
        if a.flash_from and a.flash_from not in kept:
            raise ValueError(f"arm {a.name} replays plans of arm {a.flash_from}, which is optional and not enabled; "
                             f"add --enable-arm {a.flash_from}")
    left_out = [a.name for a in matrix.arms if a.name not in kept]
    return Matrix(matrix.suites, matrix.tasks, matrix.seeds, matrix.repeats, tuple(keep), matrix.flags), left_out


def _arm_difference(a: Arm, b: Arm) -> str:
    da, db = a.to_dict(), b.to_dict()
    return ", ".join(f"{k}: {da[k]!r} -> {db[k]!r}" for k in da if da[k] != db.get(k))


def extend_matrix(stored: Matrix, new: Matrix) -> tuple[Matrix, list[str]]:
    """A results root's stored matrix extended by the new matrix's arms that it does not hold yet.

    The cells of the stored arms never change: suites, tasks, seeds, repeats and common flags
    must be equal and every arm of both must be identical. Stored arms the new matrix lacks stay
    (an optional arm not enabled this time keeps its finished cells).

    Returns:
        ``(merged matrix: the stored arms in their order, then the new ones; names of the arms added)``.
    Raises:
        ValueError: the grid or an arm differs (one line naming the difference and the fix).
    """
    for key in ("suites", "tasks", "seeds", "repeats", "flags"):
        if getattr(stored, key) != getattr(new, key):
            raise ValueError(f"the results root holds a different matrix ({key}: {list(getattr(stored, key))} there, "
                             f"{list(getattr(new, key))} now); re-run with the same {key}, or choose a new --results-root")
    old = {a.name: a for a in stored.arms}
    added = []
    for a in new.arms:
        if a.name in old:
            if old[a.name] != a:
                raise ValueError(f"arm {a.name} differs from the one in the results root ({_arm_difference(old[a.name], a)}); "
                                 "an arm's finished cells belong to its definition: give the changed arm a new name")
        else:
            added.append(a.name)
    merged = Matrix(stored.suites, stored.tasks, stored.seeds, stored.repeats,
                    stored.arms + tuple(a for a in new.arms if a.name in added), stored.flags)
    return merged, added


def _arm_from_yaml(raw: Any, i: int, base: Path) -> Arm:
    if not isinstance(raw, dict):
        raise ValueError(f"arms[{i}] must be a mapping with at least 'name'")
    unknown = sorted(set(raw) - set(ARM_KEYS))
    if unknown:
        raise ValueError(f"arms[{i}]: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(ARM_KEYS)}")
    kw = dict(raw)
    if "name" not in kw:
        raise ValueError(f"arms[{i}] has no 'name'")
    kw["name"] = str(kw["name"])
    flags = kw.get("flags") or []
    if not isinstance(flags, list):
        raise ValueError(f"arm {kw['name']}: flags must be a list, e.g. [--max-turns, '50']")
    kw["flags"] = tuple(str(f) for f in flags)
    for key in ("code_file", "vla_checkpoint", "sam3_checkpoint"):
        if kw.get(key):
            p = Path(str(kw[key])).expanduser()
            kw[key] = str(p if p.is_absolute() else (base / p).resolve())
    for key in ("price_in_usd_per_mtok", "price_out_usd_per_mtok"):
        if kw.get(key) is not None:
            try:
                kw[key] = float(kw[key])
            except (TypeError, ValueError):
                raise ValueError(f"arm {kw['name']}: {key} must be a number (USD per million tokens), "
                                 f"got {kw[key]!r}") from None
            if not kw[key] >= 0:  # as rpent-batch --price-in / --price-out
                raise ValueError(f"arm {kw['name']}: {key} must be >= 0 USD per million tokens, got {kw[key]:g}")
    if kw.get("seeds") is not None:
        kw["seeds"] = tuple(parse_index_list(kw["seeds"], f"arm {kw['name']}: seeds"))
    for key in ("optional", "share_env"):
        if key in kw and not isinstance(kw[key], bool):
            raise ValueError(f"arm {kw['name']}: {key} must be true or false, got {kw[key]!r}")
    for key in ("flash_from", "note"):
        if kw.get(key) is not None:
            kw[key] = str(kw[key])
    return Arm(**kw)


def load_matrix_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML matrix file into ``{"suites", "tasks", "seeds", "repeats", "flags", "arms"}``
    (keys present only when the file has them; relative paths resolved against the file's folder).

    Raises:
        ValueError: unreadable YAML, unknown keys, malformed values (one line naming the fix).
    """
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"matrix file {p} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"matrix file {p} is a directory, not a file; pass the YAML file's path") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"matrix file {p} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                         "save it as UTF-8 YAML") from None
    except OSError as exc:
        raise ValueError(f"matrix file {p} cannot be read ({exc.strerror or exc}); fix its permissions") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)  # where the parser stopped (0-based)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"matrix file {p} is not valid YAML{where}: {problem}; fix the file") from None
    if not isinstance(doc, dict):
        raise ValueError(f"matrix file {p} must be a mapping with suites/tasks/seeds/arms")
    allowed = {"suites", "tasks", "seeds", "repeats", "flags", "arms",
               "ray"}  # ray: placement only (rpent.batch.ray_executor), not part of the matrix
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise ValueError(f"matrix file {p}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    out: dict[str, Any] = {}
    if "suites" in doc:
        s = doc["suites"]
        if isinstance(s, str):
            s = [s]
        if not isinstance(s, list) or not s or not all(isinstance(x, str) for x in s):
            raise ValueError(f"matrix file {p}: suites must be a suite name or a list of names, "
                             f"e.g. [libero_object, libero_goal]; got {doc['suites']!r}")
        out["suites"] = tuple(s)
    if "tasks" in doc:
        out["tasks"] = tuple(parse_index_list(doc["tasks"], "tasks"))
    if "seeds" in doc:
        out["seeds"] = tuple(parse_index_list(doc["seeds"], "seeds"))
    if "repeats" in doc:
        r = doc["repeats"]
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ValueError(f"matrix file {p}: repeats must be an integer >= 1, got {r!r}")
        out["repeats"] = r
    if "flags" in doc:
        if not isinstance(doc["flags"], list):
            raise ValueError(f"matrix file {p}: flags must be a list, e.g. [--max-episode-steps, '600']")
        out["flags"] = tuple(str(f) for f in doc["flags"])
    if "arms" in doc:
        if not isinstance(doc["arms"], list) or not doc["arms"]:
            raise ValueError(f"matrix file {p}: arms must be a non-empty list")
        out["arms"] = tuple(_arm_from_yaml(a, i, p.parent.resolve()) for i, a in enumerate(doc["arms"]))
    return out

