"""A flash replay's look at one of several instances: the instance the instruction's qualifier
designates in the live scene, else the one nearest the recorded centre."""

from __future__ import annotations

from rpent.flash.episode import qualified_instances, task_instruction
from rpent.flash.replay import FlashPlanner


def _est(x: float, y: float) -> dict:
    return {"center": [x, y, 0.9], "top_z": 0.95, "bottom_z": 0.9, "major_yaw": 0.0, "major_extent": 0.1,
            "minor_extent": 0.1, "ridge_yaw": None}


def _segment_call(instances: list[dict]):
    calls = []

    def call(name: str, args: dict) -> dict:
        calls.append((name, dict(args)))
        assert name == "segment"
        return {"found": True, "object_estimate": instances[0]["object_estimate"], "instances": instances}

    return call, calls


def test_task_instruction_reads_the_task_line():
    msg = "Task: pick the akita black bowl not between the plate and the ramekin and place it on the plate\n\n(LIBERO suite x.)"
    assert task_instruction(msg) == "pick the akita black bowl not between the plate and the ramekin and place it on the plate"
    assert task_instruction("no task line here") == ""


def test_locate_takes_the_named_instance_over_the_nearest():
    insts = [{"object": "bowl_1", "object_estimate": _est(0.0, 0.0)}, {"object": "bowl_2", "object_estimate": _est(0.2, 0.0)}]
    call, calls = _segment_call(insts)
    # the recorded centre is next to bowl_1, but the qualifier designates bowl_2 in this scene
    assert FlashPlanner._locate(call, "bowl", "agentview", near=[0.01, 0.0], name="bowl_2")["center"][0] == 0.2
    assert calls[0][1]["all_instances"] is True
    # no name, or a name not among the instances: the nearest one
    assert FlashPlanner._locate(call, "bowl", "agentview", near=[0.01, 0.0])["center"][0] == 0.0
    assert FlashPlanner._locate(call, "bowl", "agentview", near=[0.19, 0.0], name="bowl_9")["center"][0] == 0.2


def test_qualified_instances_never_raises_and_leaves_unreadable_instructions_out():
    def failing_call(name, args):
        raise RuntimeError("env server gone")

    assert qualified_instances(failing_call, "") == {}
    assert qualified_instances(failing_call, "dance a jig") == {}
    # a look that fails while binding leaves the replay on the nearest instance
    assert qualified_instances(failing_call, "pick the black bowl on the left and place it on the plate") == {}


def test_qualified_instances_binds_the_leftmost_of_two_bowls():
    # "left" is world -y as the agent-view camera sees it (skills/spatial.py)
    insts = [{"object": "akita_black_bowl_1", "object_estimate": _est(0.0, 0.15), "box": [10, 10, 20, 20], "pixel_count": 50},
             {"object": "akita_black_bowl_2", "object_estimate": _est(0.0, -0.15), "box": [30, 10, 40, 20], "pixel_count": 50}]

    def call(name: str, args: dict) -> dict:
        assert name == "segment"
        if "bowl" in args["prompt"]:
            return {"found": True, "image_size": [128, 128], "object_estimate": insts[0]["object_estimate"],
                    "instances": insts}
        return {"found": True, "image_size": [128, 128], "object_estimate": _est(0.1, 0.0),
                "instances": [{"object": "plate_1", "object_estimate": _est(0.1, 0.0), "box": [50, 50, 60, 60],
                               "pixel_count": 40}]}

    names = qualified_instances(call, "pick up the black bowl on the left and place it on the plate")
    assert names == {"black bowl": "akita_black_bowl_2"}
