"""Tests of the SkillCall action schema (humanclaw_gym/skills.py)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanclaw_gym import Skill, SkillCall, SkillCallError
from humanclaw_gym.skills import (
    CLIMB_SPEEDS,
    DIRECTIONS,
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_DEFAULT_HEIGHT_M,
    SIT_HEIGHT_RANGE_M,
    SPEEDS,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    WALK_SPEED_M,
    SkillCallParseError,
    action_space,
)

# ----------------------------------------------------------------------------------------
# Strategies and fixed examples
# ----------------------------------------------------------------------------------------


def _in_range(bounds: tuple[float, float]) -> st.SearchStrategy[float]:
    low, high = bounds
    return st.sampled_from([low, high]) | st.floats(
        low, high, allow_nan=False, allow_infinity=False
    )


valid_calls = st.one_of(
    st.sampled_from(SPEEDS).map(SkillCall.walk),
    st.just(SkillCall.stop()),
    st.builds(SkillCall.turn, st.sampled_from(DIRECTIONS), _in_range(TURN_ANGLE_RANGE_DEG)),
    st.just(SkillCall.climb_up()),
    st.builds(SkillCall.sit, _in_range(SIT_HEIGHT_RANGE_M)),
    st.builds(SkillCall.step_back, _in_range(STEP_BACK_DISTANCE_RANGE_M)),
    st.builds(
        SkillCall.side_step, st.sampled_from(DIRECTIONS), _in_range(SIDE_STEP_DISTANCE_RANGE_M)
    ),
    st.just(SkillCall.climb_down()),
)

CANONICAL_TEXTS = [
    "Walk<forward><slow>",
    "Walk<forward><normal>",
    "Walk<forward><fast>",
    "Stop/Stand",
    "Turn<left><30>",
    "Turn<right><12.5>",
    "Climb upstairs<normal>",
    "Sit down<0.45>",
    "Step back<0.25>",
    "Side step<right><0.25>",
    "Side step<left><0.1>",
    "Walk downstairs<normal>",
]

# Both edges of every range, per skill: (call, canonical text).
EDGE_CASES = [
    (SkillCall.turn("left", 10), "Turn<left><10>"),
    (SkillCall.turn("right", 120), "Turn<right><120>"),
    (SkillCall.sit(0.15), "Sit down<0.15>"),
    (SkillCall.sit(0.85), "Sit down<0.85>"),
    (SkillCall.step_back(0.1), "Step back<0.1>"),
    (SkillCall.step_back(0.6), "Step back<0.6>"),
    (SkillCall.side_step("left", 0.1), "Side step<left><0.1>"),
    (SkillCall.side_step("right", 0.5), "Side step<right><0.5>"),
]


# ----------------------------------------------------------------------------------------
# Skill enum
# ----------------------------------------------------------------------------------------


def test_public_constants() -> None:
    assert SPEEDS == ("slow", "normal", "fast")
    assert CLIMB_SPEEDS == ("normal",)
    assert DIRECTIONS == ("left", "right")
    assert WALK_SPEED_M == {"slow": 0.2, "normal": 0.4, "fast": 0.6}
    assert TURN_ANGLE_RANGE_DEG == (10.0, 120.0)
    assert STEP_BACK_DISTANCE_RANGE_M == (0.1, 0.6)
    assert SIDE_STEP_DISTANCE_RANGE_M == (0.1, 0.5)
    assert SIT_HEIGHT_RANGE_M == (0.15, 0.85)
    assert SIT_DEFAULT_HEIGHT_M == 0.5


def test_skill_ids_and_names_match_upstream_table() -> None:
    expected = {
        0: ("WALK", "Walk forward", "Walk"),
        1: ("STOP", "Stop/Stand", "Stop/Stand"),
        2: ("TURN", "Turn in place", "Turn"),
        3: ("CLIMB_UP", "Climb upstairs", "Climb upstairs"),
        4: ("SIT", "Sit down", "Sit down"),
        5: ("STEP_BACK", "Step back", "Step back"),
        6: ("SIDE_STEP", "Side step", "Side step"),
        7: ("CLIMB_DOWN", "Walk downstairs", "Walk downstairs"),
    }
    assert len(Skill) == 8
    for skill_id, (name, display, text_name) in expected.items():
        skill = Skill(skill_id)
        assert skill.name == name
        assert skill.display_name == display
        assert skill.text_name == text_name
        assert skill.key == name.lower()


@pytest.mark.parametrize(
    ("name", "skill"),
    [
        ("Turn in place", Skill.TURN),
        ("side_step", Skill.SIDE_STEP),
        ("side_walk", Skill.SIDE_STEP),
        ("STEP_CLIMB_UP", Skill.CLIMB_UP),
        ("step_climb_down", Skill.CLIMB_DOWN),
        ("walk_forward", Skill.WALK),
        ("stand", Skill.STOP),
        ("  stop / stand ", Skill.STOP),
        ("sit", Skill.SIT),
        ("5", Skill.STEP_BACK),
        (7, Skill.CLIMB_DOWN),
        (np.int64(2), Skill.TURN),
    ],
)
def test_skill_from_name_aliases(name: object, skill: Skill) -> None:
    assert Skill.from_name(name) is skill  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["jump", "", 8, -1, True, 2.0, None])
def test_skill_from_name_rejects(bad: object) -> None:
    with pytest.raises(SkillCallError) as info:
        Skill.from_name(bad)  # type: ignore[arg-type]
    assert info.value.field == "skill"


# ----------------------------------------------------------------------------------------
# Construction and validation
# ----------------------------------------------------------------------------------------


def test_convenience_constructors_and_defaults() -> None:
    assert SkillCall.walk() == SkillCall(Skill.WALK, speed="normal") == SkillCall(Skill.WALK)
    assert SkillCall.sit() == SkillCall(Skill.SIT) == SkillCall.sit(SIT_DEFAULT_HEIGHT_M)
    assert SkillCall.climb_up() == SkillCall(Skill.CLIMB_UP)
    assert SkillCall.climb_down().speed == "normal"
    assert SkillCall(2, direction="left", angle_deg=30) == SkillCall.turn("left", 30.0)
    assert SkillCall(np.int64(2), direction="left", angle_deg=30).skill is Skill.TURN


def test_numbers_are_stored_as_python_float() -> None:
    for call in [
        SkillCall.turn("left", 30),
        SkillCall.turn("left", np.float64(30.5)),
        SkillCall.sit(np.int32(0) + 0.5),
        SkillCall.step_back(np.float32(0.6)),
    ]:
        for value in call.params.values():
            if not isinstance(value, str):
                assert type(value) is float
    # float32 is read as the decimal it prints as, so the inclusive edge 0.6 is accepted.
    assert SkillCall.step_back(np.float32(0.6)).distance_m == 0.6


@given(valid_calls)
def test_calls_pickle_and_copy(call: SkillCall) -> None:
    assert pickle.loads(pickle.dumps(call)) == call
    assert copy.deepcopy(call) == call
    assert dataclasses.replace(call) == call


def test_words_are_stored_as_plain_str() -> None:
    call = SkillCall.turn(np.str_("left"), 30)
    assert type(call.direction) is str


def test_calls_are_frozen_and_hashable() -> None:
    call = SkillCall.turn("left", 30)
    with pytest.raises(AttributeError):
        call.angle_deg = 40.0  # type: ignore[misc]
    assert len({call, SkillCall.turn("left", 30.0), SkillCall.stop()}) == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        # value below / above the range, per skill
        ({"skill": Skill.TURN, "direction": "left", "angle_deg": 9.999}, "angle_deg"),
        ({"skill": Skill.TURN, "direction": "left", "angle_deg": 120.001}, "angle_deg"),
        ({"skill": Skill.SIT, "height_m": 0.149}, "height_m"),
        ({"skill": Skill.SIT, "height_m": 0.851}, "height_m"),
        ({"skill": Skill.STEP_BACK, "distance_m": 0.099}, "distance_m"),
        ({"skill": Skill.STEP_BACK, "distance_m": 0.601}, "distance_m"),
        ({"skill": Skill.SIDE_STEP, "direction": "left", "distance_m": 0.099}, "distance_m"),
        ({"skill": Skill.SIDE_STEP, "direction": "left", "distance_m": 0.55}, "distance_m"),
        ({"skill": Skill.SIDE_STEP, "direction": "right", "distance_m": -0.25}, "distance_m"),
        # NaN / inf / bool / non-numbers
        ({"skill": Skill.TURN, "direction": "left", "angle_deg": math.nan}, "angle_deg"),
        ({"skill": Skill.TURN, "direction": "left", "angle_deg": math.inf}, "angle_deg"),
        ({"skill": Skill.SIT, "height_m": -math.inf}, "height_m"),
        ({"skill": Skill.SIT, "height_m": np.float64("nan")}, "height_m"),
        ({"skill": Skill.TURN, "direction": "left", "angle_deg": True}, "angle_deg"),
        ({"skill": Skill.STEP_BACK, "distance_m": np.bool_(True)}, "distance_m"),
        ({"skill": Skill.TURN, "direction": "left", "angle_deg": "30"}, "angle_deg"),
        ({"skill": Skill.SIT, "height_m": 0.5 + 0j}, "height_m"),
        ({"skill": Skill.SIT, "height_m": 10**400}, "height_m"),
        # words
        ({"skill": Skill.WALK, "speed": "sprint"}, "speed"),
        ({"skill": Skill.WALK, "speed": "Normal"}, "speed"),
        ({"skill": Skill.WALK, "speed": 1}, "speed"),
        ({"skill": Skill.TURN, "direction": "up", "angle_deg": 30}, "direction"),
        ({"skill": Skill.CLIMB_UP, "speed": "fast"}, "speed"),
        ({"skill": Skill.CLIMB_DOWN, "speed": "slow"}, "speed"),
        # required parameter missing
        ({"skill": Skill.TURN, "angle_deg": 30}, "direction"),
        ({"skill": Skill.TURN, "direction": "left"}, "angle_deg"),
        ({"skill": Skill.STEP_BACK}, "distance_m"),
        ({"skill": Skill.SIDE_STEP, "distance_m": 0.2}, "direction"),
        # parameter given to a skill that does not take it
        ({"skill": Skill.STOP, "speed": "normal"}, "speed"),
        ({"skill": Skill.WALK, "angle_deg": 30.0}, "angle_deg"),
        (
            {"skill": Skill.TURN, "direction": "left", "angle_deg": 30, "distance_m": 0.2},
            "distance_m",
        ),
        ({"skill": Skill.SIT, "direction": "left"}, "direction"),
        ({"skill": Skill.STEP_BACK, "distance_m": 0.2, "direction": "left"}, "direction"),
        (
            {"skill": Skill.SIDE_STEP, "direction": "left", "distance_m": 0.2, "height_m": 0.5},
            "height_m",
        ),
        ({"skill": Skill.CLIMB_UP, "height_m": 0.5}, "height_m"),
        # bad skill
        ({"skill": 8}, "skill"),
        ({"skill": True}, "skill"),
        ({"skill": "turn"}, "skill"),
        ({"skill": 2.0}, "skill"),
    ],
)
def test_constructor_rejects_with_named_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall(**kwargs)  # type: ignore[arg-type]
    error = info.value
    assert isinstance(error, ValueError)
    assert error.field == field
    assert f"SkillCall.{field}=" in str(error)
    assert error.allowed and str(error.allowed) in str(error)


def test_error_message_format() -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall.turn("left", 150.0)
    assert str(info.value) == (
        "SkillCall.angle_deg=150.0 is out of range: allowed 10 <= angle_deg <= 120 (Turn)"
    )
    assert info.value.value == 150.0
    assert info.value.allowed == "10 <= angle_deg <= 120"
    assert info.value.skill is Skill.TURN
    with pytest.raises(
        SkillCallError, match=r"SkillCall.speed='fast'.*'normal' \(Climb upstairs\)"
    ):
        SkillCall(Skill.CLIMB_UP, speed="fast")


def test_errors_survive_pickling() -> None:
    for make in (lambda: SkillCall.sit(2.0), lambda: SkillCall.parse("Turn<left><150>")):
        with pytest.raises(SkillCallError) as info:
            make()
        clone = pickle.loads(pickle.dumps(info.value))
        assert type(clone) is type(info.value)
        assert str(clone) == str(info.value)
        assert (clone.field, clone.value, clone.allowed, clone.skill) == (
            info.value.field,
            info.value.value,
            info.value.allowed,
            info.value.skill,
        )
    assert clone.param == "angle_deg"  # type: ignore[attr-defined]


def test_is_stop_and_is_motion() -> None:
    assert SkillCall.stop().is_stop and not SkillCall.stop().is_motion
    for skill in Skill:
        if skill is not Skill.STOP:
            call = SkillCall.parse(
                {
                    Skill.WALK: "Walk<forward><slow>",
                    Skill.TURN: "Turn<left><30>",
                    Skill.CLIMB_UP: "Climb upstairs<normal>",
                    Skill.SIT: "Sit down<0.5>",
                    Skill.STEP_BACK: "Step back<0.2>",
                    Skill.SIDE_STEP: "Side step<left><0.2>",
                    Skill.CLIMB_DOWN: "Walk downstairs<normal>",
                }[skill]
            )
            assert call.is_motion and not call.is_stop


def test_condition_units_and_signs() -> None:
    for speed, distance in WALK_SPEED_M.items():
        assert SkillCall.walk(speed).condition == {"distance_m": distance}
    assert WALK_SPEED_M == {"slow": 0.2, "normal": 0.4, "fast": 0.6}
    assert SkillCall.stop().condition == {}
    assert SkillCall.turn("left", 90).condition == {"angle_rad": pytest.approx(math.pi / 2)}
    assert SkillCall.turn("right", 90).condition == {"angle_rad": pytest.approx(-math.pi / 2)}
    assert SkillCall.side_step("left", 0.3).condition == {"lateral_m": 0.3}
    assert SkillCall.side_step("right", 0.3).condition == {"lateral_m": -0.3}
    assert SkillCall.step_back(0.3).condition == {"distance_m": 0.3}
    assert SkillCall.sit(0.45).condition == {"height_m": 0.45}
    assert SkillCall.climb_up().condition == {"stair_steps": 1.0}
    assert SkillCall.climb_down().condition == {"stair_steps": -1.0}
    call = SkillCall.sit(0.45)
    call.condition["height_m"] = 9.0
    assert call.condition == {"height_m": 0.45}


@given(valid_calls)
def test_repr_rebuilds_the_call(call: SkillCall) -> None:
    assert eval(repr(call), {"SkillCall": SkillCall}) == call


# ----------------------------------------------------------------------------------------
# Text form
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", CANONICAL_TEXTS)
def test_canonical_text_round_trip(text: str) -> None:
    call = SkillCall.parse(text)
    assert str(call) == text
    assert SkillCall.parse(str(call)) == call


@pytest.mark.parametrize(("call", "text"), EDGE_CASES)
def test_range_edges_round_trip(call: SkillCall, text: str) -> None:
    assert str(call) == text
    assert SkillCall.parse(text) == call
    assert SkillCall.from_action(call.to_action()) == call
    assert SkillCall.from_dict(call.to_dict()) == call


def test_text_of_each_skill() -> None:
    assert str(SkillCall.walk()) == "Walk<forward><normal>"
    assert str(SkillCall.turn("left", 30)) == "Turn<left><30>"
    assert str(SkillCall.turn("left", 12.5)) == "Turn<left><12.5>"
    assert str(SkillCall.sit(0.45)) == "Sit down<0.45>"
    assert str(SkillCall.step_back(0.25)) == "Step back<0.25>"
    assert str(SkillCall.side_step("right", 0.25)) == "Side step<right><0.25>"
    assert str(SkillCall.climb_up()) == "Climb upstairs<normal>"
    assert str(SkillCall.climb_down()) == "Walk downstairs<normal>"
    assert str(SkillCall.stop()) == "Stop/Stand"
    assert str(SkillCall.turn("left", 0.1 + 29.9)) == "Turn<left><30>"
    assert str(SkillCall.turn("left", 10.000000000000002)) == "Turn<left><10.000000000000002>"


@given(valid_calls)
def test_text_round_trip_is_exact(call: SkillCall) -> None:
    text = str(call)
    parsed = SkillCall.parse(text)
    assert parsed == call
    assert str(parsed) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Turn<left><30>  ", SkillCall.turn("left", 30)),
        ("turn < LEFT > < 30 >", SkillCall.turn("left", 30)),
        ("TURN IN PLACE<right><30.0>", SkillCall.turn("right", 30)),
        ("2<left><30>", SkillCall.turn("left", 30)),
        ("walk<Forward><FAST>", SkillCall.walk("fast")),
        ("walk_forward<forward><slow>", SkillCall.walk("slow")),
        ("stop/stand", SkillCall.stop()),
        ("Stop / Stand", SkillCall.stop()),
        ("Stop", SkillCall.stop()),
        ("sit down<.5>", SkillCall.sit(0.5)),
        ("Sit down<+0.45>", SkillCall.sit(0.45)),
        ("Sit down<4.5e-1>", SkillCall.sit(0.45)),
        ("side_step<Right><0.25>", SkillCall.side_step("right", 0.25)),
        ("Step back <0.25>", SkillCall.step_back(0.25)),
        ("climb upstairs<NORMAL>", SkillCall.climb_up()),
        ("step_climb_down<normal>", SkillCall.climb_down()),
    ],
)
def test_parse_is_lenient_about_spacing_case_and_names(text: str, expected: SkillCall) -> None:
    assert SkillCall.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("<left><30>", "name is missing"),
        ("Jump<high>", "unknown skill name 'Jump'"),
        ("Walk forward", "Walk takes 2"),
        ("Walk<forward>", "Walk takes 2"),
        ("Walk<forward><normal><x>", "Walk takes 2"),
        ("Walk<backward><normal>", "expected <forward>"),
        ("Walk<forward><sprint>", "speed"),
        ("Turn<left>", "Turn takes 2"),
        ("Turn<30><left>", "direction"),
        ("Turn<up><30>", "direction"),
        ("Turn<left><thirty>", "angle_deg"),
        ("Turn<left><30deg>", "angle_deg"),
        ("Turn<left><1_0>", "angle_deg"),
        ("Turn<left><nan>", "angle_deg"),
        ("Turn<left><inf>", "angle_deg"),
        ("Turn<left><-Infinity>", "angle_deg"),
        ("Turn<left><>", "angle_deg"),
        ("Turn<left><150>", "angle_deg=150.0 is out of range"),
        ("Turn<left><9.5>", "angle_deg=9.5 is out of range"),
        ("Turn<left><1e400>", "angle_deg"),
        ("Sit down<0.9>", "height_m=0.9"),
        ("Sit down<0.1>", "height_m=0.1"),
        ("Sit down", "Sit down takes 1"),
        ("Step back<0.7>", "distance_m=0.7"),
        ("Step back<0.05>", "distance_m=0.05"),
        ("Side step<right><0.55>", "distance_m=0.55"),
        ("Side step<0.25>", "Side step takes 2"),
        ("Climb upstairs<fast>", "speed"),
        ("Climb upstairs", "Climb upstairs takes 1"),
        ("Walk downstairs<slow>", "speed"),
        ("Stop/Stand<now>", "Stop/Stand takes 0"),
        ("Turn<left><30> please", "not of the form"),
        ("Turn<left<30>>", "not of the form"),
        ("Turn<left><30", "not of the form"),
        ("9<left><30>", "unknown skill name"),
        ("\u00b2<left><30>", "unknown skill name"),
        ("Turn<left><\u0663\u0660>", "angle_deg"),
    ],
)
def test_parse_rejects_bad_text(text: str, needle: str) -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall.parse(text)
    error = info.value
    assert isinstance(error, SkillCallParseError)
    assert isinstance(error, ValueError)
    assert error.field == "text"
    assert error.value == text
    assert f"SkillCall.text={text!r}" in str(error)
    assert needle in str(error)


def test_parse_error_names_the_parameter() -> None:
    with pytest.raises(SkillCallParseError) as info:
        SkillCall.parse("Side step<left><0.55>")
    assert info.value.param == "distance_m"
    assert info.value.skill is Skill.SIDE_STEP
    assert "0.1 <= distance_m <= 0.5" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "Turn" + " " * 50_000 + "<",
        "a" + " " * 50_000 + "<",
        "Turn" + "<left>" * 50_000,
        "<" * 50_000,
    ],
)
def test_parse_is_fast_on_long_hostile_text(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SkillCallParseError):
        SkillCall.parse(text)
    assert time.perf_counter() - start < 0.5


def test_parse_rejects_non_str() -> None:
    with pytest.raises(TypeError, match="str"):
        SkillCall.parse(b"Stop/Stand")  # type: ignore[arg-type]


@settings(max_examples=300)
@given(
    st.text()
    | st.lists(st.sampled_from(["Turn", "Walk", "<", ">", "left", "30", " ", "e", ".", "-"])).map(
        "".join
    )
)
def test_parse_arbitrary_text_never_raises_other_errors(text: str) -> None:
    try:
        call = SkillCall.parse(text)
    except SkillCallError as error:
        assert error.field == "text"
    else:
        assert SkillCall.parse(str(call)) == call


# ----------------------------------------------------------------------------------------
# Gymnasium encoding
# ----------------------------------------------------------------------------------------

ACTION_KEYS = [
    "skill",
    "speed",
    "direction",
    "angle_deg",
    "step_back_m",
    "side_step_m",
    "height_m",
]

# The action entries each skill reads; every other entry is ignored on decoding.
READ_KEYS = {
    Skill.WALK: {"skill", "speed"},
    Skill.STOP: {"skill"},
    Skill.TURN: {"skill", "direction", "angle_deg"},
    Skill.CLIMB_UP: {"skill"},
    Skill.SIT: {"skill", "height_m"},
    Skill.STEP_BACK: {"skill", "step_back_m"},
    Skill.SIDE_STEP: {"skill", "direction", "side_step_m"},
    Skill.CLIMB_DOWN: {"skill"},
}


def test_action_space_layout() -> None:
    from gymnasium import spaces

    space = action_space()
    assert isinstance(space, spaces.Dict)
    assert list(space.spaces) == ACTION_KEYS
    assert space["skill"] == spaces.Discrete(8)
    assert space["speed"] == spaces.Discrete(3)
    assert space["direction"] == spaces.Discrete(2)
    for key, (low, high) in {
        "angle_deg": (10.0, 120.0),
        "step_back_m": (0.1, 0.6),
        "side_step_m": (0.1, 0.5),
        "height_m": (0.15, 0.85),
    }.items():
        box = space[key]
        assert isinstance(box, spaces.Box)
        assert box.shape == (1,) and box.dtype == np.float64
        assert box.low[0] == low and box.high[0] == high
    assert SkillCall.action_space() == space


def test_action_space_boxes_match_the_skill_ranges() -> None:
    space = action_space()
    assert tuple(space["angle_deg"].low) + tuple(space["angle_deg"].high) == TURN_ANGLE_RANGE_DEG
    assert (space["step_back_m"].low[0], space["step_back_m"].high[0]) == (
        STEP_BACK_DISTANCE_RANGE_M
    )
    assert (space["side_step_m"].low[0], space["side_step_m"].high[0]) == (
        SIDE_STEP_DISTANCE_RANGE_M
    )
    assert (space["height_m"].low[0], space["height_m"].high[0]) == SIT_HEIGHT_RANGE_M


def test_to_action_neutral_defaults() -> None:
    action = SkillCall.stop().to_action()
    assert list(action) == ACTION_KEYS
    assert int(action["skill"]) == 1
    assert int(action["speed"]) == 1
    assert int(action["direction"]) == 0
    assert action["angle_deg"].tolist() == [30.0]
    assert action["step_back_m"].tolist() == [0.25]
    assert action["side_step_m"].tolist() == [0.25]
    assert action["height_m"].tolist() == [0.5]
    walk = SkillCall.walk("fast").to_action()
    assert int(walk["speed"]) == 2
    right = SkillCall.turn("right", 45).to_action()
    assert int(right["direction"]) == 1 and right["angle_deg"].tolist() == [45.0]
    assert SkillCall.climb_up().to_action()["speed"] == 1


def test_to_action_writes_distance_to_the_skills_own_key() -> None:
    back = SkillCall.step_back(0.6).to_action()
    assert back["step_back_m"].tolist() == [0.6]
    assert back["side_step_m"].tolist() == [0.25]
    side = SkillCall.side_step("right", 0.5).to_action()
    assert side["side_step_m"].tolist() == [0.5]
    assert side["step_back_m"].tolist() == [0.25]
    assert int(side["direction"]) == 1
    for action in (back, side):
        assert action_space().contains(action)


@given(valid_calls)
def test_action_round_trip_and_space_contains(call: SkillCall) -> None:
    action = call.to_action()
    assert action_space().contains(action)
    assert SkillCall.from_action(action) == call


@pytest.mark.parametrize(
    "angle",
    [
        30,
        30.0,
        np.float64(30.0),
        np.float32(30.0),
        np.int64(30),
        np.array(30.0),
        np.array([30.0]),
        [30.0],
    ],
)
def test_from_action_accepts_scalar_forms(angle: object) -> None:
    for skill in (2, np.int64(2), np.array(2), np.array([2], dtype=np.int32), np.uint8(2)):
        action = {"skill": skill, "direction": np.array([1]), "angle_deg": angle}
        assert SkillCall.from_action(action) == SkillCall.turn("right", 30)


def test_from_action_ignores_unused_fields() -> None:
    action = {
        "skill": 0,
        "speed": 0,
        "direction": "garbage",
        "angle_deg": math.nan,
        "step_back_m": np.array([[1.0, 2.0]]),
        "side_step_m": 0.55,
        "height_m": True,
    }
    assert SkillCall.from_action(action) == SkillCall.walk("slow")
    assert SkillCall.from_action({"skill": 1}) == SkillCall.stop()
    assert SkillCall.from_action({"skill": 3, "speed": 1}) == SkillCall.climb_up()
    # Step back does not read side_step_m and Side step does not read step_back_m.
    back = {"skill": 5, "step_back_m": 0.6, "side_step_m": 0.6}
    assert SkillCall.from_action(back) == SkillCall.step_back(0.6)
    side = {"skill": 6, "direction": 0, "side_step_m": 0.5, "step_back_m": 0.05}
    assert SkillCall.from_action(side) == SkillCall.side_step("left", 0.5)


@pytest.mark.parametrize("skill", [Skill.CLIMB_UP, Skill.CLIMB_DOWN])
@pytest.mark.parametrize(
    "speed", [0, 1, 2, np.int64(0), np.array([2]), 7, -1, "fast", math.nan, None, "absent"]
)
def test_stair_skills_decode_with_any_speed(skill: Skill, speed: object) -> None:
    action: dict[str, object] = {"skill": int(skill)}
    if speed != "absent":
        action["speed"] = speed
    call = SkillCall.from_action(action)
    assert call.skill is skill
    assert call.speed == "normal"
    assert call == (SkillCall.climb_up() if skill is Skill.CLIMB_UP else SkillCall.climb_down())


@given(valid_calls, st.integers(0, 2**32 - 1))
def test_unread_entries_may_hold_any_in_space_value(call: SkillCall, seed: int) -> None:
    space = action_space(seed=seed)
    action = call.to_action()
    for key in ACTION_KEYS:
        if key not in READ_KEYS[call.skill]:
            action[key] = space[key].sample()
    assert space.contains(action)
    assert SkillCall.from_action(action) == call


def test_from_action_float32_edge_is_accepted() -> None:
    action = {"skill": 5, "step_back_m": np.array([0.6], dtype=np.float32)}
    assert SkillCall.from_action(action) == SkillCall.step_back(0.6)
    action = {"skill": 6, "direction": 1, "side_step_m": np.array([0.5], dtype=np.float32)}
    assert SkillCall.from_action(action) == SkillCall.side_step("right", 0.5)
    action = {"skill": 6, "direction": 0, "side_step_m": np.array([0.1], dtype=np.float16)}
    assert SkillCall.from_action(action) == SkillCall.side_step("left", 0.1)


@pytest.mark.parametrize(
    ("action", "field"),
    [
        ({}, "skill"),
        ({"skill": 8}, "skill"),
        ({"skill": -1}, "skill"),
        ({"skill": True}, "skill"),
        ({"skill": np.bool_(True)}, "skill"),
        ({"skill": 2.0}, "skill"),
        ({"skill": np.float64(2.0)}, "skill"),
        ({"skill": np.array([1, 2])}, "skill"),
        ({"skill": np.array([[2]])}, "skill"),
        ({"skill": "2"}, "skill"),
        ({"skill": None}, "skill"),
        ({"skill": 0}, "speed"),
        ({"skill": 0, "speed": 3}, "speed"),
        ({"skill": 0, "speed": np.array([1.0])}, "speed"),
        ({"skill": 0, "speed": True}, "speed"),
        ({"skill": 2, "direction": 2, "angle_deg": 30.0}, "direction"),
        ({"skill": 2, "direction": 0}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([math.nan])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([np.inf])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([130.0])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([30.0, 40.0])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([[30.0]])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([True])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": True}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": "30"}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array(["30"])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": np.array([30 + 0j])}, "angle_deg"),
        ({"skill": 2, "direction": 0, "angle_deg": [[30.0]]}, "angle_deg"),
        ({"skill": 4, "height_m": np.array([0.9])}, "height_m"),
        # Step back / Side step read their own keys, with their own ranges
        ({"skill": 5}, "step_back_m"),
        ({"skill": 5, "step_back_m": np.array([0.05])}, "step_back_m"),
        ({"skill": 5, "step_back_m": 0.601}, "step_back_m"),
        ({"skill": 5, "step_back_m": np.array([math.nan])}, "step_back_m"),
        ({"skill": 5, "step_back_m": np.bool_(True)}, "step_back_m"),
        ({"skill": 5, "step_back_m": "0.2"}, "step_back_m"),
        ({"skill": 6, "direction": 0}, "side_step_m"),
        ({"skill": 6, "side_step_m": 0.2}, "direction"),
        ({"skill": 6, "direction": 0, "side_step_m": np.array([0.55])}, "side_step_m"),
        ({"skill": 6, "direction": 0, "side_step_m": 0.55}, "side_step_m"),
        ({"skill": 6, "direction": 1, "side_step_m": 0.6}, "side_step_m"),
        ({"skill": 6, "direction": 1, "side_step_m": -0.25}, "side_step_m"),
        ({"skill": 6, "direction": 1, "side_step_m": np.array([-np.inf])}, "side_step_m"),
        ({"skill": 6, "direction": 1, "side_step_m": np.array([0.2, 0.3])}, "side_step_m"),
        # unknown keys, including the old shared distance entry
        ({"skill": 1, "jump": 1}, "action"),
        ({"skill": 5, "distance_m": np.array([0.2])}, "action"),
        ({"skill": 6, "direction": 0, "side_step_m": 0.2, "distance_m": 0.2}, "action"),
    ],
)
def test_from_action_rejects_with_named_field(action: dict[str, object], field: str) -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall.from_action(action)
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            {"skill": 6, "direction": 0, "side_step_m": 0.55},
            "SkillCall.side_step_m=0.55 is out of range: "
            "allowed 0.1 <= side_step_m <= 0.5 (Side step)",
        ),
        (
            {"skill": 5, "step_back_m": np.array([0.7])},
            "SkillCall.step_back_m=0.7 is out of range: "
            "allowed 0.1 <= step_back_m <= 0.6 (Step back)",
        ),
        (
            {"skill": 5},
            "SkillCall.step_back_m=None is missing: allowed 0.1 <= step_back_m <= 0.6 (Step back)",
        ),
    ],
)
def test_distance_entry_errors_name_the_key_and_range(
    action: dict[str, object], message: str
) -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall.from_action(action)
    assert str(info.value) == message
    assert info.value.skill is Skill(action["skill"])
    assert "distance_m" not in str(info.value)


def test_unknown_key_error_lists_the_action_keys() -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall.from_action({"skill": 5, "distance_m": 0.2})
    assert info.value.value == "distance_m"
    assert info.value.allowed == "keys " + ", ".join(ACTION_KEYS)


def test_from_action_rejects_non_mapping() -> None:
    with pytest.raises(TypeError, match="mapping"):
        SkillCall.from_action([2, 0, 0, 30.0, 0.2, 0.2, 0.5])  # type: ignore[arg-type]


def _check_sample(space: object, sample: dict[str, object]) -> SkillCall:
    """Decode a space sample; it must be valid and match the sampled entries."""
    call = SkillCall.from_action(sample)  # must not raise
    assert int(sample["skill"]) == call.skill  # type: ignore[call-overload]
    for key in READ_KEYS[call.skill] - {"skill"}:
        entry = np.asarray(sample[key]).reshape(-1)[0]
        if key == "speed":
            assert call.speed == SPEEDS[int(entry)]
        elif key == "direction":
            assert call.direction == DIRECTIONS[int(entry)]
        elif key in ("step_back_m", "side_step_m"):
            assert call.distance_m == float(entry)
        else:
            assert getattr(call, key) == float(entry)
    assert space.contains(call.to_action())  # type: ignore[attr-defined]
    assert SkillCall.from_action(call.to_action()) == call
    return call


def test_every_action_space_sample_decodes() -> None:
    space = action_space(seed=0)
    seen: set[Skill] = set()
    for _ in range(3000):
        seen.add(_check_sample(space, space.sample()).skill)
    assert seen == set(Skill)


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_seeded_samples_always_decode(seed: int) -> None:
    space = action_space(seed=seed)
    for _ in range(20):
        _check_sample(space, space.sample())


def test_action_space_extremes_decode() -> None:
    """The Box corners (the values most likely to fall outside a skill's range) decode."""
    space = action_space()
    for pick in ("low", "high"):
        action = {
            "speed": np.int64(2),
            "direction": np.int64(1),
            **{
                key: getattr(space[key], pick).copy()
                for key in ("angle_deg", "step_back_m", "side_step_m", "height_m")
            },
        }
        for skill in Skill:
            sample = {"skill": np.int64(int(skill)), **action}
            assert space.contains(sample)
            _check_sample(space, sample)


@pytest.mark.filterwarnings("ignore:.*symmetric and normalized space")
def test_check_env_accepts_a_skill_call_env() -> None:
    """Gymnasium's env checker steps with random samples; decoding must never fail."""
    import gymnasium as gym
    from gymnasium import spaces
    from gymnasium.utils.env_checker import check_env

    class _DecodeEnv(gym.Env):
        def __init__(self) -> None:
            self.action_space = action_space()
            self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
            self.decoded: list[SkillCall] = []

        def reset(  # type: ignore[override]
            self, *, seed: int | None = None, options: dict | None = None
        ):
            super().reset(seed=seed)
            return np.zeros(2, np.float32), {}

        def step(self, action: dict):  # type: ignore[override]
            self.decoded.append(SkillCall.from_action(action))
            return np.zeros(2, np.float32), 0.0, False, False, {}

    env = _DecodeEnv()
    check_env(env, skip_render_check=True)
    assert env.decoded


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(),
    st.text(max_size=3),
    st.builds(np.float32, st.floats(width=32)),
    st.builds(np.int64, st.integers(-3, 10)),
    st.lists(st.floats(), max_size=2).map(np.array),
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from([*ACTION_KEYS, "distance_m"]), _junk))
def test_from_action_junk_never_raises_other_errors(action: dict[str, object]) -> None:
    try:
        SkillCall.from_action(action)
    except SkillCallError:
        pass


# ----------------------------------------------------------------------------------------
# JSON form and coercion
# ----------------------------------------------------------------------------------------


def test_to_dict_shape() -> None:
    assert SkillCall.turn("left", 30).to_dict() == {
        "skill": "turn",
        "direction": "left",
        "angle_deg": 30.0,
    }
    assert SkillCall.stop().to_dict() == {"skill": "stop"}
    assert SkillCall.climb_up().to_dict() == {"skill": "climb_up", "speed": "normal"}


@given(valid_calls)
def test_dict_round_trip_through_json(call: SkillCall) -> None:
    data = json.loads(json.dumps(call.to_dict()))
    assert SkillCall.from_dict(data) == call


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "skill"),
        ({"skill": "jump"}, "skill"),
        ({"skill": "turn", "direction": "left"}, "angle_deg"),
        ({"skill": "walk", "angle_deg": 30.0}, "angle_deg"),
        ({"skill": "sit", "height_m": "0.5"}, "height_m"),
        ({"skill": "stop", "foo": 1}, "dict"),
    ],
)
def test_from_dict_rejects(data: dict[str, object], field: str) -> None:
    with pytest.raises(SkillCallError) as info:
        SkillCall.from_dict(data)
    assert info.value.field == field


def test_from_dict_accepts_loose_skill_names() -> None:
    assert SkillCall.from_dict({"skill": "Sit down", "height_m": 0.4}) == SkillCall.sit(0.4)
    assert SkillCall.from_dict({"skill": 1}) == SkillCall.stop()


def test_coerce_accepts_every_form() -> None:
    call = SkillCall.side_step("left", 0.3)
    assert SkillCall.coerce(call) is call
    assert SkillCall.coerce("Side step<left><0.3>") == call
    assert SkillCall.coerce(call.to_dict()) == call
    assert SkillCall.coerce(call.to_action()) == call
    with pytest.raises(SkillCallError):
        SkillCall.coerce("Side step<left><0.6>")
    with pytest.raises(SkillCallError):
        SkillCall.coerce({"skill": 6, "direction": 0, "side_step_m": np.array([0.6])})


@pytest.mark.parametrize("bad", [None, 3, 2.5, b"Stop/Stand", ["Stop/Stand"], Skill.STOP])
def test_coerce_rejects_other_types(bad: object) -> None:
    with pytest.raises(TypeError) as info:
        SkillCall.coerce(bad)
    message = str(info.value)
    for kind in ("SkillCall", "text", "JSON", "action-space"):
        assert kind in message


# ----------------------------------------------------------------------------------------
# Import cost
# ----------------------------------------------------------------------------------------


def test_import_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, humanclaw_gym, humanclaw_gym.skills\n"
        "heavy = [m for m in ('pybullet', 'torch', 'moderngl') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""


# ----------------------------------------------------------------------------------------
# Error messages echo a bounded part of the input
# ----------------------------------------------------------------------------------------

_HUGE = 1_000_000


@pytest.mark.parametrize(
    "make",
    [
        lambda: SkillCall.parse("W" * _HUGE),  # one huge unknown skill name
        lambda: SkillCall.parse("Turn<left><" + "9" * _HUGE + ">"),  # a huge number
        lambda: SkillCall.parse("Turn<" + "l" * _HUGE + "><30>"),  # a huge word
        lambda: SkillCall.parse("Walk<forward><normal>" + "<x>" * (_HUGE // 3)),  # many slots
        lambda: SkillCall.parse("Walk<" + "f" * _HUGE + "><normal>"),
        lambda: SkillCall.parse("Turn<left><1" + "0" * _HUGE + ">"),  # out of range
        lambda: SkillCall.from_dict({"skill": "s" * _HUGE}),
        lambda: SkillCall.from_dict({"skill": "turn", "direction": "d" * _HUGE, "angle_deg": 30}),
        lambda: SkillCall.from_dict({"skill": "turn", "k" * _HUGE: 1}),
        lambda: SkillCall.from_action({"skill": 0, "z" * _HUGE: 1}),
        lambda: SkillCall(Skill.TURN, direction="left", angle_deg=30, speed="x" * _HUGE),
    ],
)
def test_error_messages_echo_a_bounded_part_of_huge_input(make) -> None:
    """A model can answer with a megabyte of text: the error says what is wrong and how
    long the input was, without echoing all of it (the value stays on the exception)."""
    with pytest.raises(SkillCallError) as info:
        make()
    message = str(info.value)
    assert len(message) < 2000, len(message)
    assert "characters)" in message or "takes" in message
    assert isinstance(info.value.value, (str, float, type(None)))


def test_short_values_are_still_echoed_whole() -> None:
    with pytest.raises(SkillCallParseError, match=r"SkillCall.text='Turn<left><400>'"):
        SkillCall.parse("Turn<left><400>")
    with pytest.raises(SkillCallError, match=r"'sprint' is not accepted"):
        SkillCall.from_dict({"skill": "walk", "speed": "sprint"})
    long = "Turn<left><" + "1" * 200 + ">"
    with pytest.raises(SkillCallParseError) as info:
        SkillCall.parse(long)
    assert f"({len(long)} characters)" in str(info.value) and info.value.value == long
