"""Replay policy server: speaks the VLA predict contract and replays recorded action sequences.

No trained VLA exists on a CPU test machine, yet the toolkit's ``pi0_pick`` and the batch
evaluation need a VLA endpoint whose actions make an episode succeed. This server answers
``vla.predict`` with the next ``n_exec`` actions of a recorded sequence (e.g. the executed
actions of a successful offline-planner run), so the env replays that run step for step
(LIBERO is deterministic for a given init state and action sequence). ``--zero`` mode answers
all-zero actions instead (a do-nothing policy for plumbing tests).

Replay file (JSON, ``"format": "rpent.replay"``, schema_version 1)::

    {"format": "rpent.replay", "schema_version": 1,
     "sequences": {"libero_goal_t0_s0": {"suite": "libero_goal", "task": 0, "seed": 0,
                                        "task_language": "...", "actions": [[7 floats], ...],
                                        "states": [[8 floats], ...]   # optional, state before each action
                                        }}}

The sequence id is the record's task id ``<suite>_t<task>_s<seed>`` (seed selects the init
state, rpent_reference §1.3). :func:`replay_table_from_records` builds the table from
trajectory records (``--from-records DIR``).

Episode identification (each episode has its own cursor into its sequence):

* ``options={"episode_key": "libero_goal_t0_s0#7"}`` (batch of 1) or ``options={"episode_keys":
  [key, ...]}`` (one per batch row, for batch evaluation with many envs in parallel). A key is
  ``<sequence id>`` optionally followed by ``#<anything>``; the part before ``#`` picks the
  sequence, the whole key names the episode. A key seen for the first time starts at action 0.
* No key (the toolkit's ``pi0_pick``, one client): the *default episode*, which replays the
  default sequence (``--default-sequence``, or the only sequence, or the one whose
  task_language equals the request's task description). Its cursor restarts at 0 when the
  request's state equals the sequence's first recorded state (a new episode from the same init
  state; needs ``states`` in the table) or on ``vla.replay_reset``.

When a sequence runs out, the remaining rows of a chunk hold the pose (zero deltas) with the
last gripper command; ``vla.replay_status`` reports exhausted episodes.

Methods: ``vla.predict(observation, options=None)`` -> float32 [B, n_exec, 7];
``vla.metadata()``; ``vla.replay_reset(episode_key=None)`` (``None`` resets every episode);
``vla.replay_status()`` -> ``{episode_key: {"sequence", "cursor", "length", "exhausted"}}``.
"""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from rpent.recording.reader import find_record_dirs, load_record
from rpent.rpc.server import RpcServer

REPLAY_FORMAT = "rpent.replay"
REPLAY_SCHEMA_VERSION = 1
ACTION_DIM = 7
STATE_DIM = 8
DEFAULT_N_EXEC = 5
"""Actions returned per call: the LIBERO Pi0.5 preset executes chunks of 5 (rpent_reference §1.4)."""
DEFAULT_EPISODE = "<default>"
ALLOWED_OPTIONS = ("mode", "episode_key", "episode_keys")
STATE_MATCH_ATOL = 1e-3
"""Tolerance (state units: m, rad) for recognising the sequence's initial state (new episode).

``LiberoSim.reset`` restores the init state up to ~2e-4 (gripper qpos, measured), so an exact
match would miss resets; 1 mm / 1 mrad in every state dimension is still far from any state
the arm reaches once it has moved."""


class ReplayTableError(ValueError):
    """The replay file or records cannot be used (message names the problem and the fix)."""


def _sequence(sid: str, entry: Any) -> dict:
    if not isinstance(entry, dict):
        raise ReplayTableError(f"sequence {sid!r} must be an object with 'actions'")
    actions = np.asarray(entry.get("actions"), dtype=np.float32)
    if actions.ndim != 2 or actions.shape[1] != ACTION_DIM or actions.shape[0] < 1:
        raise ReplayTableError(f"sequence {sid!r}: actions must be [n>=1, {ACTION_DIM}] numbers, got shape {actions.shape}")
    if not np.all(np.isfinite(actions)):
        raise ReplayTableError(f"sequence {sid!r}: actions contain NaN/inf")
    states = None
    if entry.get("states") is not None:
        states = np.asarray(entry["states"], dtype=np.float32)
        if states.shape != (actions.shape[0], STATE_DIM):
            raise ReplayTableError(
                f"sequence {sid!r}: states must be [{actions.shape[0]}, {STATE_DIM}] (one per action), got {states.shape}"
            )
    return {
        "actions": actions,
        "states": states,
        "task_language": entry.get("task_language"),
        "suite": entry.get("suite"),
        "task": entry.get("task"),
        "seed": entry.get("seed"),
    }


def load_replay_table(path: str | Path) -> dict[str, dict]:
    """Read a replay JSON file into ``{sequence_id: {"actions" f32[n,7], "states" f32[n,8]|None, ...}}``.

    Raises:
        ReplayTableError: wrong format marker/version, no sequences, bad shapes.
        OSError: the file cannot be read.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReplayTableError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != REPLAY_FORMAT:
        raise ReplayTableError(f"{path}: not a replay file (expected \"format\": \"{REPLAY_FORMAT}\")")
    if doc.get("schema_version") != REPLAY_SCHEMA_VERSION:
        raise ReplayTableError(f"{path}: schema_version {doc.get('schema_version')!r}; this server reads 1")
    seqs = doc.get("sequences")
    if not isinstance(seqs, dict) or not seqs:
        raise ReplayTableError(f"{path}: 'sequences' must be a non-empty object")
    return {str(k): _sequence(str(k), v) for k, v in seqs.items()}


def replay_table_from_records(root: str | Path, *, successful_only: bool = True) -> dict[str, dict]:
    """Build a replay table from trajectory records under ``root`` (see :mod:`rpent.recording`).

    Each record contributes its executed actions (every source, in ``seq`` order) from the first
    action while ``step`` counts up from 0 without a gap (the first episode of the record), with
    the recorded state before each action. The sequence id is the record's ``task_id``; the first
    record of a task id wins.

    Args:
        successful_only: use only records whose ``environment_success`` is ``true``.

    Raises:
        ReplayTableError: no usable record was found.
        FileNotFoundError: ``root`` does not exist.
    """
    table: dict[str, dict] = {}
    for rd in find_record_dirs(root):
        rec = load_record(rd)
        task = rec.task or {}
        if rec.task is None or (successful_only and task.get("environment_success") is not True):
            continue
        actions, states = [], []
        for i, a in enumerate(rec.actions.records):
            if a.get("step") != i:
                break
            actions.append(a["action"])
            states.append(a["obs"]["state"])
        sid = str(task.get("task_id") or rd.name)
        if actions and sid not in table:
            table[sid] = _sequence(
                sid,
                {"actions": actions, "states": states, "task_language": task.get("task_language"),
                 "suite": task.get("suite"), "task": task.get("task"), "seed": task.get("seed")},
            )
    if not table:
        raise ReplayTableError(
            f"no {'successful ' if successful_only else ''}trajectory record with actions under {root}; "
            "record a run with --record-trajectory first"
        )
    return table


def save_replay_table(table: dict[str, dict], path: str | Path) -> None:
    """Write ``table`` as a replay JSON file (the format :func:`load_replay_table` reads)."""
    from rpent.recording.atomic import write_json_atomic

    doc = {
        "format": REPLAY_FORMAT,
        "schema_version": REPLAY_SCHEMA_VERSION,
        "sequences": {
            sid: {
                "suite": s.get("suite"), "task": s.get("task"), "seed": s.get("seed"),
                "task_language": s.get("task_language"),
                "actions": s["actions"].tolist(),
                "states": None if s.get("states") is None else s["states"].tolist(),
            }
            for sid, s in table.items()
        },
    }
    write_json_atomic(Path(path), doc)


class ReplayPolicyServer(RpcServer):
    """VLA-contract server that replays recorded action sequences (or returns zeros).

    Args:
        table: replay table (``None`` only with ``zero=True``).
        n_exec: actions returned per call (>= 1).
        zero: answer all-zero actions, ignoring any table.
        default_sequence: sequence id for requests without an episode key.
        embodiment: reported by ``vla.metadata`` (``"libero"``).

    Raises:
        ValueError: ``n_exec < 1``, no table without ``zero``, unknown ``default_sequence``.
    """

    def __init__(
        self,
        table: dict[str, dict] | None,
        *,
        n_exec: int = DEFAULT_N_EXEC,
        zero: bool = False,
        default_sequence: str | None = None,
        embodiment: str = "libero",
        name: str = "replay_policy_server",
    ) -> None:
        super().__init__(name=name)
        if n_exec < 1:
            raise ValueError(f"n_exec must be >= 1, got {n_exec}")
        if not zero and not table:
            raise ValueError("a replay table is needed unless zero mode is on (--replay FILE, --from-records DIR or --zero)")
        if default_sequence is not None and default_sequence not in (table or {}):
            raise ValueError(f"default sequence {default_sequence!r} is not in the table; known: {sorted(table or {})}")
        self.table = table or {}
        self.n_exec = int(n_exec)
        self.zero = zero
        self.default_sequence = default_sequence
        self.embodiment = embodiment
        self._cursors: dict[str, dict] = {}  # episode key -> {"sequence", "cursor"}
        self._state_lock = threading.Lock()
        self.register("vla.predict", self.predict, readonly=False)
        self.register("vla.metadata", self.metadata, readonly=True)
        self.register("vla.replay_reset", self.replay_reset, readonly=False)
        self.register("vla.replay_status", self.replay_status, readonly=True)

    # ---------------------------------------------------------------- methods
    def metadata(self) -> dict:
        """``{embodiment, action_dim, action_horizon, n_exec, num_flow_steps, num_views, image_size, policy, sequences}``."""
        return {
            "embodiment": self.embodiment,
            "action_dim": ACTION_DIM,
            "action_horizon": self.n_exec,
            "n_exec": self.n_exec,
            "num_flow_steps": 0,
            "num_views": 2,
            "image_size": 256,
            "policy": "zero" if self.zero else "replay",
            "sequences": sorted(self.table),
        }

    def replay_reset(self, episode_key: str | None = None) -> dict:
        """Restart episode ``episode_key`` at action 0 (``None``: forget every episode). Returns ``{"reset": [keys]}``."""
        with self._state_lock:
            if episode_key is None:
                keys = sorted(self._cursors)
                self._cursors.clear()
            else:
                keys = [episode_key] if self._cursors.pop(episode_key, None) is not None else []
        return {"reset": keys}

    def replay_status(self) -> dict:
        """``{episode_key: {"sequence", "cursor", "length", "exhausted"}}`` of every episode seen."""
        with self._state_lock:
            return {
                k: {
                    "sequence": c["sequence"],
                    "cursor": c["cursor"],
                    "length": int(self.table[c["sequence"]]["actions"].shape[0]),
                    "exhausted": c["cursor"] >= self.table[c["sequence"]]["actions"].shape[0],
                }
                for k, c in self._cursors.items()
            }

    def predict(self, observation: dict, options: dict | None = None) -> np.ndarray:
        """Return the next ``n_exec`` actions for each batch row: float32 [B, n_exec, 7], environment units.

        Raises:
            ValueError: malformed observation (shapes/dtypes/lengths), unknown option keys, wrong
                number of episode keys, unknown sequence, or no way to pick the default sequence.
        """
        batch = _check_observation(observation)
        keys = _episode_keys(options, batch)
        if self.zero:
            return np.zeros((batch, self.n_exec, ACTION_DIM), dtype=np.float32)
        out = np.empty((batch, self.n_exec, ACTION_DIM), dtype=np.float32)
        with self._state_lock:
            for b in range(batch):
                out[b] = self._next_chunk(keys[b], observation, b)
        return out

    # --------------------------------------------------------------- internals
    def _default_sequence_for(self, description: str) -> str:
        if self.default_sequence is not None:
            return self.default_sequence
        if len(self.table) == 1:
            return next(iter(self.table))
        matches = [sid for sid, s in self.table.items() if s.get("task_language") == description]
        if len(matches) == 1:
            return matches[0]
        raise ValueError(
            f"cannot pick a replay sequence for task description {description!r} ({len(matches)} match among "
            f"{sorted(self.table)}); pass options={{'episode_key': '<sequence id>'}} or start the server with "
            "--default-sequence"
        )

    def _next_chunk(self, key: str | None, observation: dict, b: int) -> np.ndarray:
        state = np.asarray(observation["states"][b], dtype=np.float32)
        if key is None:
            sid = self._default_sequence_for(str(observation["task_descriptions"][b]))
            key = DEFAULT_EPISODE
            cur = self._cursors.get(key)
            seq = self.table[sid]
            at_start = seq["states"] is not None and np.allclose(state, seq["states"][0], atol=STATE_MATCH_ATOL)
            if cur is None or cur["sequence"] != sid or (at_start and cur["cursor"] > 0):
                cur = self._cursors[key] = {"sequence": sid, "cursor": 0}
        else:
            sid = key.split("#", 1)[0]
            if sid not in self.table:
                raise ValueError(f"episode key {key!r}: no replay sequence {sid!r}; known: {sorted(self.table)}")
            cur = self._cursors.setdefault(key, {"sequence": sid, "cursor": 0})
        actions = self.table[sid]["actions"]
        start = cur["cursor"]
        chunk = actions[start : start + self.n_exec]
        cur["cursor"] = start + chunk.shape[0]
        if chunk.shape[0] < self.n_exec:
            hold = np.zeros((self.n_exec - chunk.shape[0], ACTION_DIM), dtype=np.float32)
            hold[:, 6] = actions[-1, 6]  # keep the last gripper command, zero pose delta
            chunk = np.concatenate([chunk, hold])
        return chunk


def _check_observation(observation: Any) -> int:
    if not isinstance(observation, dict):
        raise ValueError("observation must be a dict with main_images, wrist_images, states, task_descriptions")
    missing = [k for k in ("main_images", "wrist_images", "states", "task_descriptions") if k not in observation]
    if missing:
        raise ValueError(f"observation lacks {missing}; see the VLA predict contract in docs/interfaces.md")
    states = np.asarray(observation["states"])
    if states.ndim != 2 or states.shape[1] != STATE_DIM:
        raise ValueError(f"states must be float32 [B, {STATE_DIM}], got shape {states.shape}")
    batch = states.shape[0]
    for k in ("main_images", "wrist_images"):
        img = np.asarray(observation[k])
        if img.dtype != np.uint8 or img.ndim != 4 or img.shape[0] != batch or img.shape[3] != 3:
            raise ValueError(f"{k} must be uint8 [B={batch}, H, W, 3], got {img.dtype} {img.shape}")
    desc = observation["task_descriptions"]
    if not isinstance(desc, (list, tuple)) or len(desc) != batch:
        raise ValueError(f"task_descriptions must be a list of {batch} strings")
    return batch


def _episode_keys(options: Any, batch: int) -> list[str | None]:
    if options is None:
        return [None] * batch
    if not isinstance(options, dict):
        raise ValueError(f"options must be a dict or None, got {type(options).__name__}")
    unknown = sorted(set(options) - set(ALLOWED_OPTIONS))
    if unknown:
        raise ValueError(f"unknown option key(s) {unknown}; the replay server accepts {list(ALLOWED_OPTIONS)}")
    if "episode_keys" in options:
        keys = options["episode_keys"]
        if not isinstance(keys, (list, tuple)) or len(keys) != batch or not all(isinstance(k, str) and k for k in keys):
            raise ValueError(f"options['episode_keys'] must be {batch} non-empty strings (one per batch row)")
        return list(keys)
    if "episode_key" in options:
        if batch != 1:
            raise ValueError(f"options['episode_key'] is for a batch of 1; this batch has {batch}: use episode_keys")
        if not isinstance(options["episode_key"], str) or not options["episode_key"]:
            raise ValueError("options['episode_key'] must be a non-empty string")
        return [options["episode_key"]]
    return [None] * batch


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of ``python -m rpent.robots.components.replay_policy_server``."""
    from rpent.rpc.cli import add_server_args

    p = argparse.ArgumentParser(
        prog="replay_policy_server",
        description="VLA-contract server replaying recorded action sequences (or zeros).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--replay", metavar="FILE", help="replay JSON file (format rpent.replay)")
    src.add_argument("--from-records", metavar="DIR", help="build the table from trajectory records under DIR")
    src.add_argument("--zero", action="store_true", help="answer all-zero actions")
    p.add_argument("--n-exec", type=int, default=DEFAULT_N_EXEC, help=f"actions per call (default {DEFAULT_N_EXEC})")
    p.add_argument("--default-sequence", help="sequence id for requests without an episode key")
    p.add_argument("--embodiment", default="libero")
    add_server_args(p)
    return p


def main(argv: list[str] | None = None) -> None:
    """Serve until shutdown. Exits 2 on a bad replay source (message on stderr)."""
    import sys

    from rpent.rpc.cli import serve_from_args

    args = build_parser().parse_args(argv)
    try:
        if args.zero:
            table = None
        elif args.replay:
            table = load_replay_table(args.replay)
        else:
            table = replay_table_from_records(args.from_records)
        server = ReplayPolicyServer(
            table, n_exec=args.n_exec, zero=args.zero, default_sequence=args.default_sequence,
            embodiment=args.embodiment,
        )
    except (ValueError, OSError) as e:
        print(f"replay_policy_server: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    serve_from_args(server, args)


if __name__ == "__main__":
    main()
