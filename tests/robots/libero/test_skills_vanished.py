"""Wording of a failed look for an object an earlier look found (scripted planner)."""

from rpent.robots.libero.skills.scene import vanished_note


def test_never_seen_adds_nothing():
    assert vanished_note(None) == ""


def test_seen_before_names_the_instance_and_where():
    note = vanished_note(("white_yellow_mug_1", (-0.095, 0.0213, 0.9357)))
    assert "white_yellow_mug_1 was seen at (-0.095, 0.021, 0.936) m" in note
    assert "no longer in the camera images" in note
