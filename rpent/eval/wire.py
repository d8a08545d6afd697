"""Messages between the evaluation driver and its env worker processes.

Each message is a dict sent over a ``multiprocessing`` pipe as one :mod:`rpent.rpc.codec` frame
(msgpack with zero-copy ndarrays; never pickle). Message kinds (key ``op``):

driver -> worker:
    ``epoch``   {epoch, slots: [{local_index, env_index, task_id, init_state_id}]}: reset every env
                to its slot's init state and reply with the first ``obs``.
    ``actions`` {epoch, env_indices: [G...], actions: float32 [n, num_action_chunks, 7]}: execute one
                action chunk in each listed env.
    ``close``   {}: close the envs and exit.

worker -> driver:
    ``ready``   {worker, pid, build_s, sims_built}: the worker imported the simulator, built its
                first epoch's envs and is waiting for work.
    ``obs``     {epoch, env_indices, main_images u8 [n,H,W,3], wrist_images u8 [n,H,W,3],
                states f32 [n,8], task_descriptions [str], episodes: [EpisodeResult dict]}: envs
                still running need actions; ``episodes`` lists trajectories that just finished.
    ``epoch_done`` {epoch, episodes, timing: {physics_s, render_s, reset_s, build_s, wait_s, video_s}}.
    ``error``   {worker, message, traceback}: the worker failed and is exiting.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

from rpent.rpc.codec import dumps, loads


def send(conn: Connection, message: dict[str, Any]) -> None:
    """Send one message (a dict with ``op``) over ``conn``."""
    conn.send_bytes(dumps(message))


def recv(conn: Connection) -> dict[str, Any]:
    """Receive one message from ``conn``.

    Raises:
        EOFError: the other end closed (the process exited).
        ValueError: the frame is not a message dict with an ``op`` key.
    """
    message = loads(bytearray(conn.recv_bytes()))
    if not isinstance(message, dict) or "op" not in message:
        raise ValueError(f"malformed evaluation message: {type(message).__name__} without 'op'")
    return message
