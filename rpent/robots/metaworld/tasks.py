"""Meta-World task lists: the MT10 and MT50 suites, task indices, names and instructions.

Pure data (no simulator import): the agent side resolves ``--task`` names and renders prompts
from here, the env server checks the same names against the installed ``metaworld`` package
(``tests/robots/metaworld`` checks that both lists agree with ``metaworld.MT10``/``MT50`` 3.1.1).

Suites and order: ``mt10`` is Meta-World's MT10 in its own order (Yu et al., "Meta-World",
CoRL 2019, Table 1; ``metaworld.MT10().train_classes``); ``mt50`` is the 50 environments of
``metaworld.MT50().train_classes`` in that dict's order. Task names are the ``-v3`` environment
names of metaworld 3.x. A task's index is its position in the suite's list; both suites
accept names too (``resolve``).

Instructions: one imperative English sentence per task, written for this project from the
task descriptions of the Meta-World paper (Appendix, "Task descriptions"); they name the
object and the goal the way a planner or a language-conditioned policy is told.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SUITES", "MT10", "MT50", "INSTRUCTIONS", "MetaWorldTask", "task_info", "resolve", "suite_names"]

#: Instruction of each task (Meta-World paper's task descriptions, rephrased as commands).
INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "pick up the round nut and place it onto the peg",
    "basketball-v3": "pick up the basketball and dunk it into the hoop",
    "bin-picking-v3": "pick the puck out of the red bin and place it into the blue bin",
    "box-close-v3": "pick up the box lid and place it onto the box",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "press the button behind the wall from the top",
    "button-press-v3": "press the button from the front",
    "button-press-wall-v3": "press the button behind the wall from the front",
    "coffee-button-v3": "push the button on the coffee machine",
    "coffee-pull-v3": "pull the mug away from the coffee machine",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "rotate the dial 180 degrees",
    "disassemble-v3": "pick the round nut off the peg",
    "door-close-v3": "close the door with its revolving joint",
    "door-lock-v3": "lock the door by rotating the lock clockwise",
    "door-open-v3": "open the door with its revolving joint",
    "door-unlock-v3": "unlock the door by rotating the lock counter-clockwise",
    "hand-insert-v3": "insert the gripper into the hole",
    "drawer-close-v3": "push the drawer closed",
    "drawer-open-v3": "pull the drawer open",
    "faucet-open-v3": "rotate the faucet handle counter-clockwise",
    "faucet-close-v3": "rotate the faucet handle clockwise",
    "hammer-v3": "hammer the screw into the wall",
    "handle-press-side-v3": "press the handle down sideways",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up sideways",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever down 90 degrees",
    "pick-place-wall-v3": "pick up the puck and place it at the goal behind the wall",
    "pick-out-of-hole-v3": "pick the puck up out of the hole",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "plate-slide-v3": "slide the plate into the cabinet",
    "plate-slide-side-v3": "slide the plate into the cabinet sideways",
    "plate-slide-back-v3": "slide the plate out of the cabinet",
    "plate-slide-back-side-v3": "slide the plate out of the cabinet sideways",
    "peg-insert-side-v3": "insert the peg sideways into the hole",
    "peg-unplug-side-v3": "unplug the peg sideways from the hole",
    "soccer-v3": "kick the soccer ball into the goal",
    "stick-push-v3": "grasp the stick and push the box with it to the goal",
    "stick-pull-v3": "grasp the stick and pull the box with it to the goal",
    "push-v3": "push the puck to the goal",
    "push-wall-v3": "push the puck around the wall to the goal",
    "push-back-v3": "pull the puck back to the goal",
    "reach-v3": "reach the goal position with the gripper",
    "reach-wall-v3": "reach the goal position behind the wall with the gripper",
    "shelf-place-v3": "pick up the puck and place it onto the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the table",
    "window-open-v3": "push the window open",
    "window-close-v3": "push the window closed",
}

#: MT10 in ``metaworld.MT10().train_classes`` order.
MT10: tuple[str, ...] = (
    "reach-v3", "push-v3", "pick-place-v3", "door-open-v3", "drawer-open-v3", "drawer-close-v3",
    "button-press-topdown-v3", "peg-insert-side-v3", "window-open-v3", "window-close-v3",
)

#: MT50 in ``metaworld.MT50().train_classes`` order (filled from the instruction table's keys,
#: which are written in that order; the test checks it against metaworld).
MT50: tuple[str, ...] = tuple(INSTRUCTIONS)

SUITES: dict[str, tuple[str, ...]] = {"mt10": MT10, "mt50": MT50}


@dataclass(frozen=True)
class MetaWorldTask:
    """One task of a suite.

    Attributes:
        suite: ``mt10`` or ``mt50``.
        task: index in the suite (0-based).
        name: the metaworld environment name (``reach-v3``).
        language: the instruction given to planners and policies.
    """

    suite: str
    task: int
    name: str
    language: str


def suite_names() -> tuple[str, ...]:
    """The suites (``mt10``, ``mt50``)."""
    return tuple(SUITES)


def _suite(suite: str) -> tuple[str, ...]:
    try:
        return SUITES[str(suite).lower()]
    except KeyError:
        raise ValueError(f"unknown Meta-World suite {suite!r}; choose one of: {', '.join(SUITES)}") from None


def task_info(suite: str, task: int) -> MetaWorldTask:
    """``(suite, index)`` -> :class:`MetaWorldTask`.

    Raises:
        ValueError: unknown suite, or an index out of range (the message lists the range).
    """
    names = _suite(suite)
    if not isinstance(task, int) or isinstance(task, bool) or not 0 <= task < len(names):
        raise ValueError(f"Meta-World suite {suite} has tasks 0-{len(names) - 1} ({names[0]} ... {names[-1]}); "
                         f"got {task!r}")
    name = names[task]
    return MetaWorldTask(str(suite).lower(), task, name, INSTRUCTIONS[name])


def resolve(suite: str, task: str | int) -> tuple[str, int]:
    """A ``--task`` value (an index, or a name with or without ``-v3``) -> ``(suite, index)``.

    Raises:
        ValueError: unknown suite, index out of range, or a name not in the suite (the message
            lists the suite's names).
    """
    names = _suite(suite)
    text = str(task).strip()
    if text.isdigit():
        return task_info(suite, int(text)).suite, int(text)
    name = text if text.endswith("-v3") else f"{text}-v3"
    if name not in names:
        raise ValueError(f"no Meta-World task {text!r} in {suite}; tasks: {', '.join(names)}")
    return str(suite).lower(), names.index(name)
