"""Pure tests of place qualifiers, paraphrases, stacking and door steps in instruction plans.

The instructions are LIBERO's own (libero_90 and the LIBERO-PRO ``_lan`` paraphrases, as their
BDDL files give them) and a few written like them; the expected instances follow the BDDL
init regions of those tasks (front = world +x, toward the agentview camera; left = world -y).
"""

from __future__ import annotations

import pytest

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.language import FixtureGoal, Qualifier, TaskPlan, Unsupported, parse_object_phrase, parse_task
from rpent.robots.libero.skills.qualifiers import normalise, read_place_qualifier, stack_and_place
from rpent.robots.libero.skills.spatial import resolve_qualifier


def est(x, y, size=0.1):
    return ObjectEstimate(center=(x, y, 0.93), top_z=0.95, bottom_z=0.90, major_yaw=0.0, major_extent=size,
                          minor_extent=size, source="test")


@pytest.mark.parametrize("phrase, head, relation", [
    ("the butter at the back", "butter", "back"),
    ("the black bowl at the front", "black bowl", "front"),
    ("the black bowl on the left", "black bowl", "left"),
    ("the book on the right", "book", "right"),
    ("the book in the middle", "book", "middle"),
    ("the middle black bowl", "black bowl", "middle"),
    ("the back black bowl", "black bowl", "back"),
    ("the left plate", "plate", "left"),
    ("the bowl on the left side", "bowl", "left"),
])
def test_place_qualifiers(phrase, head, relation):
    name, q = parse_object_phrase(phrase)
    assert (name, q.relation, q.refs) == (head, relation, ())


def test_place_qualifier_reader_leaves_other_phrases():
    assert read_place_qualifier("black bowl on the plate") is None
    assert read_place_qualifier("the middle") is None  # no head: not an object phrase
    assert read_place_qualifier("black bowl from table center") is None


@pytest.mark.parametrize("text, steps", [
    ("put the butter at the back in the top drawer of the cabinet and close it",
     ["butter (at the back) in top drawer of the cabinet", "close the top drawer of the cabinet"]),
    ("put the black bowl at the front on the plate", ["black bowl (at the front) on plate"]),
    ("put the middle black bowl on top of the cabinet", ["black bowl (middle) on cabinet"]),
    ("stack the black bowl at the front on the black bowl in the middle",
     ["black bowl (at the front) on black bowl (in the middle)"]),
    ("stack the middle black bowl on the back black bowl", ["black bowl (middle) on black bowl (back)"]),
    ("stack the left bowl on the right bowl and place them in the tray",
     ["bowl (right) in tray", "bowl (left) on bowl (right)"]),
    ("pick up the book in the middle and place it on the cabinet shelf", ["book (in the middle) on cabinet shelf"]),
    ("put the yellow and white mug to the front of the white mug", ["yellow and white mug in front of white mug"]),
    ("move the plate to the stove\u2019s front", ["plate in front of stove"]),
    ("pick up the book and place in back compartment", ["book in back compartment of the caddy"]),
    ("close the microwave", ["close the microwave"]),
    ("open the microwave door", ["open the microwave"]),
])
def test_plans(text, steps):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan), plan
    assert [g.describe() for g in plan.steps] == steps


def test_door_step_is_a_fixture_goal_without_a_drawer():
    plan = parse_task("shut the microwave")
    assert isinstance(plan, TaskPlan)
    (g,) = plan.steps
    assert isinstance(g, FixtureGoal) and (g.action, g.fixture_phrase, g.part_words) == ("close", "microwave", ())


def test_normalise_and_stack_and_place():
    assert normalise("move the plate to the stove s front") == "move the plate to the front of the stove"
    assert normalise("stack the middle black bowl on the back black bowl") == "put the middle black bowl on the back black bowl"
    assert normalise("put the bowl on the plate") == "put the bowl on the plate"
    assert stack_and_place("stack the right bowl on the left bowl and place them in the tray") == (
        "put the left bowl in the tray", "put the right bowl on the left bowl")
    assert stack_and_place("stack the right bowl on the left bowl") is None


def test_place_qualifiers_resolve_like_the_bddl_regions():
    # KITCHEN_SCENE2: front bowl (0.1, 0.15), middle (-0.05, 0.2), back (-0.15, 0.05) (table frame, m)
    bowls = [est(-0.05, 0.2), est(0.1, 0.15), est(-0.15, 0.05)]
    assert resolve_qualifier(Qualifier("front"), bowls, {}) == 1
    assert resolve_qualifier(Qualifier("back"), bowls, {}) == 2
    assert resolve_qualifier(Qualifier("middle"), bowls, {}) == 0
    # STUDY_SCENE4: yellow books at y 0 (right) and -0.25 (left), the black book between them at y -0.15
    books = [est(0.0, 0.0), est(-0.05, -0.25), est(0.05, -0.15)]
    assert resolve_qualifier(Qualifier("right"), books, {}) == 0
    assert resolve_qualifier(Qualifier("left"), books, {}) == 1
    assert resolve_qualifier(Qualifier("middle"), books, {}) == 2



# libero_spatial_object t9, seed 0: segment(all_instances=True) estimates (agentview), the bowl on
# the wooden cabinet (its collision bottom at 1.126 m) and the one on the stove.
_SO_T9 = {
    "black bowl": [("black_bowl_1", {"center": [0.0472, -0.2765, 1.0399], "top_z": 1.1786, "bottom_z": 0.9012,
                                     "major_extent": 0.0991, "minor_extent": 0.0613, "support": [0.0122, -0.2762, 1.1682]}),
                   ("black_bowl_2", {"center": [-0.2625, -0.1385, 0.9392], "top_z": 0.9773, "bottom_z": 0.9012,
                                     "major_extent": 0.1006, "minor_extent": 0.0765, "support": [-0.2959, -0.1403, 0.9718]})],
    "wooden cabinet": [("wooden_cabinet_1", {"center": [0.0518, -0.2265, 1.0141], "top_z": 1.1274, "bottom_z": 0.9009,
                                             "major_extent": 0.2371, "minor_extent": 0.1173,
                                             "support": [0.0502, -0.237, 1.127]})],
    "plate": [("yellow_plate_1", {"center": [0.0465, 0.1977, 0.9094], "top_z": 0.9179, "bottom_z": 0.9009,
                                  "major_extent": 0.1064, "minor_extent": 0.1058, "support": [0.0459, 0.1956, 0.9091]})],
}


def _recorded_call(name, args):
    if name == "view_fixtures":
        return {"fixtures": {}}
    assert name == "segment"
    items = _SO_T9[args["prompt"]]
    return {"found": True, "image_size": [256, 256], "instances": [
        {"object": n, "box": [10, 10, 50, 50], "pixel_count": 100 - i, "object_estimate": e} for i, (n, e) in enumerate(items)]}


def test_an_object_qualified_on_furniture_stands_on_its_top():
    from rpent.robots.libero.skills import scene

    (goal,) = parse_task("pick up the black bowl on the wooden cabinet and place it on the plate").steps
    picked = scene.localise_step(_recorded_call, goal)
    assert picked.object_name == "black_bowl_1"
    assert picked.obj.bottom_z == pytest.approx(1.127)  # the cabinet's top, not the table seen behind it
    assert picked.obj.top_z == pytest.approx(1.1786) and picked.obj.center[:2] == pytest.approx((0.0472, -0.2765))
    # an object whose estimate does not reach below the support's top is left as it is
    est = ObjectEstimate(**_SO_T9["black bowl"][1][1])
    assert scene.resting_on(est, ObjectEstimate(**_SO_T9["wooden cabinet"][0][1])) is est


def test_a_step_falls_back_to_the_wrist_camera_and_names_both_cameras_when_neither_sees_it():
    from rpent.robots.libero.skills import scene

    seen = []

    def call(name, args):
        if name == "view_fixtures":
            return {"fixtures": {}}
        seen.append((args["prompt"], args["camera"]))
        if args["prompt"] == "black bowl" and args["camera"] == "wrist":
            return _recorded_call(name, args)
        if args["prompt"] == "black bowl":
            return {"found": False, "reason": "empty mask"}
        return _recorded_call(name, args)

    (goal,) = parse_task("pick up the black bowl on the wooden cabinet and place it on the plate").steps
    picked = scene.localise_step(call, goal)
    assert picked.object_name == "black_bowl_1"
    assert seen[:2] == [("black bowl", "agentview"), ("black bowl", "wrist")]

    with pytest.raises(scene.NotFound, match=r"could not localise 'black bowl': empty mask; the wrist camera: empty mask"):
        scene.find_instances_or_wrist(lambda n, a: {"found": False, "reason": "empty mask"}, "black bowl")
