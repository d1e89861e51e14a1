"""The ``paper`` metric rules reproduce the reference release; ``strict`` keeps ours.

One hand-built case per point of docs/metrics.md ("Metric rules"), each with the value the
reference release's rule gives, and a property test that pins the ``paper`` FindSR sentence
rule on generated visible-state texts against an independent restatement of the reference
rule written here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanclaw_gym.metrics import (
    METRIC_RULES,
    RULES,
    CollisionTracker,
    EpisodeMetricRecorder,
    EpisodeStart,
    UsageTracker,
    aggregate,
    aggregate_metric_files,
    category_aliases,
    check_rules,
    claims_target_visible,
    collision_body_group,
    episode_floor,
    is_collision_contact,
    summary_to_reference_layout,
    validate_metrics,
)
from humanclaw_gym.metrics.interact import (
    InteractTracker,
    interact_target_ids,
    pelvis_target_contact,
    scene_object_handles,
)
from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID
from humanclaw_gym.policy import Usage
from humanclaw_gym.skills import Skill

REFERENCE_RUN = Path(__file__).parent / "fixtures" / "reference_run"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


def contact(link: int, body: int, y: float) -> np.ndarray:
    row = np.zeros(1, dtype=CONTACT_DTYPE)
    row["a"], row["link_a"], row["b"], row["link_b"] = HUMAN_ID, link, body, -1
    row["pos_a"] = row["pos_b"] = (0.0, y, 0.0)
    return row


def test_rules_setting():
    assert METRIC_RULES == ("paper", "strict")
    assert check_rules("paper") == "paper"
    with pytest.raises(ValueError, match=r"rules must be one of \('paper', 'strict'\)"):
        check_rules("reference")
    assert [r.point for r in RULES] == list(range(1, 13))


# -- 1. find aliases -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, category, paper, strict",
    [
        ("A commode is on the left.", "toilet", True, False),
        ("I see a mattress.", "bed", True, False),
        ("A sectional fills the corner.", "couch", True, False),
        ("A stool stands by the bar.", "chair", True, False),
        ("A monitor on the desk.", "tv", True, False),
        ("A flower pot by the door.", "potted_plant", True, False),
        ("A houseplant by the door.", "potted_plant", True, True),  # "plant" is a substring
        ("A TV monitor hangs there.", "tv", True, True),
        ("A loveseat is ahead.", "couch", True, True),
    ],
)
def test_point1_find_aliases(text, category, paper, strict):
    assert claims_target_visible(text, [category], "paper") is paper
    assert claims_target_visible(text, [category], "strict") is strict


def test_point1_alias_tables():
    assert category_aliases("chair", "paper") == ("chair", "armchair", "stool", "seat")
    assert category_aliases("potted_plant", "paper") == (
        "potted plant",
        "plant",
        "flower pot",
        "flowerpot",
    )
    assert category_aliases("coffee_table", "paper") == ("coffee table",)
    assert category_aliases("chair", "strict") == ("chair", "armchair")


# -- 2. substring matching -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, category, paper, strict",
    [
        ("The bedroom door is open.", "bed", True, False),
        ("A seating area with cushions.", "chair", True, False),
        ("The targets are far.", "bed", True, True),  # plural of "target"
        ("An untargeted corridor.", "bed", True, False),
        ("A TELEVISION!", "tv", True, True),
        ("Beds everywhere.", "bed", True, True),
    ],
)
def test_point2_substring_matching(text, category, paper, strict):
    assert claims_target_visible(text, [category], "paper") is paper
    assert claims_target_visible(text, [category], "strict") is strict


# -- 3. negation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, paper, strict",
    [
        ("The bed doesn't look close.", True, False),
        ("The bed wasn't there before.", True, False),
        ("I don\u2019t see a bed.", True, False),  # curly apostrophe
        ("I can\u2019t see the bed.", True, False),
        ("I don't see a bed.", False, False),
        ("NO bed here.", False, False),
        ("The bed is not visible.", False, False),
        ("The bed is nowhere.", True, True),  # "nowhere" is not the word "no"
        ("None of these is a bed.", False, False),
        ("A bed with no pillows.", False, False),
    ],
)
def test_point3_negation(text, paper, strict):
    assert claims_target_visible(text, ["bed"], "paper") is paper
    assert claims_target_visible(text, ["bed"], "strict") is strict


# -- 4. sentence split ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, paper, strict",
    [
        ("No chair here\nA bed is ahead", False, True),
        ("No chair here.A bed is ahead.", False, True),
        ("No chair here. A bed is ahead.", True, True),
        ("No chair here.\nA bed is ahead.", True, True),
        ("No chair here。A bed is ahead.", False, True),  # CJK full stop
        ("The bed is 1.5 m away; no chair.", False, False),
        ("  The bed is ahead.  ", True, True),
        ("", False, False),
        (None, False, False),
    ],
)
def test_point4_sentence_split(text, paper, strict):
    assert claims_target_visible(text, ["bed"], "paper") is paper
    assert claims_target_visible(text, ["bed"], "strict") is strict


# -- 5. Coll. for episodes without motion ----------------------------------------------------


def _stopped_at_once(rules: str, episode_id: str) -> dict:
    rec = EpisodeMetricRecorder(
        EpisodeStart(
            episode_id=episode_id,
            scene_id="s",
            category="tv",
            target_ids=[5],
            target_aabbs=np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]]),
            interact=False,
            dynamic_ids=[],
            floor_height_m=0.0,
            initial_penetration_m=0.0,
            rules=rules,
        )
    )
    rec.record_decision(0, 0, None, Skill.STOP, ())
    return rec.finalize(np.array([[3.0, 0.5, 0.5]]), "stop")


def _half_colliding(rules: str) -> dict:
    rec = EpisodeMetricRecorder(
        EpisodeStart(
            episode_id="moving",
            scene_id="s",
            category="tv",
            target_ids=[5],
            target_aabbs=np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]]),
            interact=False,
            dynamic_ids=[],
            floor_height_m=0.0,
            initial_penetration_m=0.0,
            rules=rules,
        )
    )
    frames = np.zeros((1, 75))
    frames[:, 1] = 0.9
    for step, y in ((0, 1.0), (1, 0.0)):  # step 0 hits a wall at 1 m, step 1 only the floor
        rec.record_decision(step, 0, None, Skill.WALK, ())
        rec.record_generated_chunk(step, frames)
        rec.record_frame(
            step, Skill.WALK, 0, True, contact(22, 2, y), [], np.zeros((0, 3)), frames[0]
        )
    rec.record_decision(2, 0, None, Skill.STOP, ())
    return rec.finalize(np.array([[3.0, 0.5, 0.5]]), "stop")


def test_point5_collision_without_motion():
    paper = [_half_colliding("paper"), _stopped_at_once("paper", "still")]
    assert paper[1]["collision_rate"] == 0.0 and paper[1]["motion_steps"] == 0
    assert aggregate(paper)["main"]["collision_pct"] == 25.0  # (50 + 0) / 2
    strict = [_half_colliding("strict"), _stopped_at_once("strict", "still")]
    assert strict[1]["collision_rate"] is None
    assert aggregate(strict)["main"]["collision_pct"] == 50.0  # the still episode left out


# -- 6. body groups ------------------------------------------------------------------------

NECK, LEFT_COLLAR, RIGHT_COLLAR = 12, 13, 14


def test_point6_body_groups():
    assert collision_body_group(LEFT_COLLAR, "paper") == "arm/hand"
    assert collision_body_group("right_collar", "paper") == "arm/hand"
    assert collision_body_group(NECK, "paper") == "torso"
    assert collision_body_group(LEFT_COLLAR, "strict") == "torso"
    assert collision_body_group(NECK, "strict") == "head"
    assert collision_body_group(15, "paper") == collision_body_group(15, "strict") == "head"
    for rules, groups in (
        ("paper", {"arm/hand": 1, "torso": 1, "leg/foot": 0, "head": 0}),
        ("strict", {"arm/hand": 0, "torso": 1, "leg/foot": 0, "head": 1}),
    ):
        tracker = CollisionTracker([], 0.0, rules=rules)
        tracker.record_frame(0, contact(LEFT_COLLAR, 2, 1.2))
        tracker.record_frame(1, contact(NECK, 2, 1.5))
        assert tracker.summary()["collision_steps_by_group"] == groups


# -- 7. fixed geometry ---------------------------------------------------------------------


def test_point7_fixed_geometry_includes_unknown_bodies_under_paper():
    unknown = contact(22, -1, 1.0)[0]  # a body that is no scene object (stage, unknown)
    assert is_collision_contact(unknown, [10], 0.0, rules="paper")
    assert not is_collision_contact(unknown, [10], 0.0, rules="strict")
    movable = contact(22, 10, 1.0)[0]
    for rules in METRIC_RULES:
        assert not is_collision_contact(movable, [10], 0.0, rules=rules)
        assert is_collision_contact(contact(22, 3, 1.0)[0], [10], 0.0, rules=rules)


# -- 8. failed model calls ------------------------------------------------------------------


def test_point8_failed_calls_cost_prompt_chars_div_4_under_paper():
    failed = Usage("planner", 1, source="none", prompt_chars=4001)
    ok = Usage("planner", 2, input_tokens=900, output_tokens=40)
    paper, strict = UsageTracker("paper"), UsageTracker("strict")
    paper.record([failed, ok])
    strict.record([failed, ok])
    assert paper.summary()["input_tokens"] == 900 + 1001  # ceil(4001 / 4)
    assert paper.summary()["source"] == "mixed" and paper.summary()["failed_calls"] == 1
    assert strict.summary()["input_tokens"] == 900 and strict.summary()["source"] == "provider"
    alone = UsageTracker("paper")
    alone.record([failed])
    assert alone.summary()["source"] == "estimated_chars_div_4"
    # a "none" record without a prompt length (an older client) costs nothing either way
    old = UsageTracker("paper")
    old.record([Usage("planner", 1, source="none")])
    assert old.summary()["input_tokens"] == 0 and old.summary()["source"] == "none"
    with pytest.raises(ValueError, match="prompt_chars"):
        Usage("planner", 1, source="none", prompt_chars=-1)


# -- 9. no floor under the spawn ------------------------------------------------------------


def test_point9_floor_fallback():
    assert episode_floor(0.02, 0.0, "paper") == (0.02, "spawn_raycast")
    assert episode_floor(None, 0.12, "paper") == (0.12, "body_lowest_point_fallback")
    with pytest.raises(ValueError, match="no floor under the spawn"):
        episode_floor(None, 0.12, "strict")


# -- 10. the reference layout ----------------------------------------------------------------


def test_point10_reference_files_aggregate_to_the_reference_summary():
    """The hand-written reference-layout run gives, number for number, the summary the
    reference release's aggregation gives (worked out by hand in summary_expected.json)."""
    summary = aggregate_metric_files(REFERENCE_RUN)
    assert summary["rules"] == "paper" and summary["counts"]["imported_episodes"] == 3
    expected = json.loads((REFERENCE_RUN / "summary_expected.json").read_text())
    expected.pop("_comment")
    assert summary_to_reference_layout(summary) == expected


# -- 11. the interact target ----------------------------------------------------------------


def _scene_objects(*templates: str | None) -> list[SimpleNamespace]:
    """Objects 2, 3, ... of an imported scene (a None template: a generated object)."""
    return [
        SimpleNamespace(
            object_id=2 + i,
            source=None if t is None else SimpleNamespace(template=t, index=i),
        )
        for i, t in enumerate(templates)
    ]


def test_point11_habitat_handles_number_instances_per_template():
    objects = _scene_objects("c0ffee", "objects/humanclaw/beef", "c0ffee", None, "c0ffee_part_1")
    objects.append(
        SimpleNamespace(object_id=9, source=SimpleNamespace(template="stages/1", index=None))
    )
    assert scene_object_handles(objects) == {
        2: "c0ffee_:0000",
        3: "beef_:0000",
        4: "c0ffee_:0001",
        6: "c0ffee_part_1_:0000",
    }  # the generated object (5) and the stage (9) have none


def test_point11_another_instance_of_the_target_template():
    """The target is couch 2 (template c0ffee); the pelvis (joint 0, the root link) lands on
    couch 4, a second instance of the same template: the reference counts it."""
    handles = scene_object_handles(
        _scene_objects("c0ffee", "beef", "c0ffee", None, "c0ffee_part_1")
    )
    assert interact_target_ids([2], handles, "paper") == {2, 4, 6}  # 6: "c0ffee" in its name
    assert interact_target_ids([2], handles, "strict") == {2}
    assert interact_target_ids([5], handles, "paper") == {5}  # no template: by id
    assert interact_target_ids([2], None, "paper") == {2}
    on_twin = contact(0, 4, 0.5)
    for rules, expected in (("paper", True), ("strict", False)):
        tracker = InteractTracker([2], handles, rules=rules)
        tracker.record_frame(0, Skill.SIT, on_twin, last_in_chunk=True)
        assert tracker.geo_interact_success is expected
        assert tracker.interact_success(active_stop=True) is expected
    # the hip on the twin, or the pelvis on another template, counts under neither
    for row in (contact(1, 4, 0.5), contact(0, 3, 0.5)):
        assert not pelvis_target_contact(row, interact_target_ids([2], handles, "paper"))


def test_point11_the_recorder_takes_the_handles():
    def recorder(rules: str) -> EpisodeMetricRecorder:
        return EpisodeMetricRecorder(
            EpisodeStart(
                "e",
                "s",
                "couch",
                [2],
                np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]]),
                True,
                [],
                0.0,
                0.0,
                rules=rules,
                object_handles={2: "c0ffee_:0000", 4: "c0ffee_:0001"},
            )
        )

    for rules, expected in (("paper", True), ("strict", False)):
        rec = recorder(rules)
        rec.record_decision(0, 0, None, Skill.SIT, ())
        rec.record_generated_chunk(0, np.zeros((15, 75)))
        for i in range(15):
            rows = contact(0, 4, 0.5) if i == 14 else contact(1, 99, 0.5)[:0]
            rec.record_frame(0, Skill.SIT, i, i == 14, rows, (), np.zeros((0, 3)), np.zeros(75))
        rec.record_decision(1, 0, None, Skill.STOP, ())
        metrics = rec.finalize(np.zeros((1, 3)), "stop")
        assert metrics["interact_success"] is expected
        assert metrics["target_ids"] == [2]


# -- 12. visible_state type -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (["a bed ahead"], True),  # its text "['a bed ahead']" names the bed
        ({"objects": "bed, lamp"}, True),
        (["no bed"], False),  # negated
        (0, False),  # falsy values are no text
        (False, False),
        ([], False),
        ({}, False),
        (3.5, False),
    ],
)
def test_point12_visible_state_of_any_type(value, expected):
    assert claims_target_visible(value, ["bed"], "paper") is expected
    with pytest.raises(TypeError, match="str or None"):
        claims_target_visible(value, ["bed"], "strict")


# -- docs --------------------------------------------------------------------------------------


def test_docs_list_every_rule_with_both_variants():
    text = DOCS.read_text()
    for rule in RULES:
        row = [line for line in text.splitlines() if line.startswith(f"| {rule.point} |")]
        assert row, f"docs/metrics.md has no row for rule {rule.point} ({rule.name})"
        assert rule.name in row[0]


# -- property: the paper FindSR sentence rule ------------------------------------------------

REFERENCE_NAMES = {
    "couch": ("couch", "sofa", "loveseat", "sectional"),
    "bed": ("bed", "mattress"),
    "toilet": ("toilet", "commode"),
    "chair": ("chair", "armchair", "stool", "seat"),
    "tv": ("tv", "television", "screen", "monitor"),
    "potted_plant": ("potted plant", "plant", "flower pot", "flowerpot"),
}
REFERENCE_NEGATIONS = (
    "no",
    "not",
    "cannot",
    "can't",
    "don't",
    "isn't",
    "aren't",
    "n't",
    "without",
    "unable",
    "none",
)


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _reference_sentences(text: str) -> list[str]:
    """Cut after . ! ? when whitespace follows (the whitespace run is dropped)."""
    out, current, i = [], "", 0
    while i < len(text):
        current += text[i]
        if text[i] in ".!?" and i + 1 < len(text) and text[i + 1].isspace():
            j = i + 1
            while j < len(text) and text[j].isspace():
                j += 1
            out.append(current)
            current, i = "", j
            continue
        i += 1
    out.append(current)
    return out


def _reference_negated(sentence: str) -> bool:
    low = sentence.lower()
    for word in REFERENCE_NEGATIONS:
        start = low.find(word)
        while start >= 0:
            end = start + len(word)
            before_ok = start == 0 or not _word_char(low[start - 1])
            after_ok = end == len(low) or not _word_char(low[end])
            if before_ok and after_ok:
                return True
            start = low.find(word, start + 1)
    return False


def reference_claim(text: str | None, category: str) -> bool:
    """The reference release's rule, restated independently for the property test."""
    names = REFERENCE_NAMES.get(category, (category.replace("_", " "),))
    for sentence in _reference_sentences((text or "").strip()):
        low = sentence.lower()
        if ("target" in low or any(n in low for n in names)) and not _reference_negated(sentence):
            return True
    return False


_WORDS = st.sampled_from(
    [
        "I", "see", "a", "the", "is", "ahead", "left", "right", "room", "door", "near",
        "bed", "beds", "Bed", "BED", "bedroom", "bedside", "mattress", "sofa", "sofas",
        "couch", "couches", "Sectional", "loveseat", "toilet", "commode", "chair", "chairs",
        "armchair", "stool", "seat", "seating", "tv", "TV", "television", "screen",
        "monitor", "potted", "plant", "plants", "houseplant", "flower", "pot", "flowerpot",
        "target", "targets", "no", "No", "NO", "not", "nothing", "none", "None", "nowhere",
        "cannot", "can't", "can\u2019t", "don't", "don\u2019t", "doesn't", "isn't",
        "aren't", "wasn't", "n't", "without", "unable", "know", "snow", "1.5", "2", "m",
        "床", "沙发", "没有", "看到", "椅子",
    ]
)  # fmt: skip
_SEPARATORS = st.sampled_from(
    [" ", " ", " ", "  ", ". ", "! ", "? ", ".", "!", "\n", ".\n", "\n\n", ", ", "; ", "\t",
     "。", "！", "-", "_", "'"]
)  # fmt: skip


@st.composite
def visible_states(draw: st.DrawFn) -> str:
    words = draw(st.lists(_WORDS, min_size=0, max_size=14))
    text = ""
    for word in words:
        text += word + draw(_SEPARATORS)
    return draw(st.sampled_from(["", " ", "\n"])) + text


@settings(max_examples=600, deadline=None, derandomize=True)
@given(visible_states(), st.sampled_from([*REFERENCE_NAMES, "coffee_table"]))
def test_paper_find_rule_matches_the_reference_rule(text, category):
    assert claims_target_visible(text, [category], "paper") is reference_claim(text, category)


def test_reference_restatement_agrees_with_a_regex_reading():
    """The restatement above is itself checked against a literal regex reading of the rule
    on a few sentences, so the property test compares two independent implementations."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, REFERENCE_NEGATIONS)) + r")\b", re.I)
    for sentence in ("No bed.", "Isn't it", "doesn't", "snow", "n't", "x_no", "no_x", "(not)"):
        assert _reference_negated(sentence) is bool(pattern.search(sentence)), sentence
    for text in ("a. b", "a.b", "a.\n\nb", "a!  b? c", "a\nb"):
        assert _reference_sentences(text) == re.split(r"(?<=[.!?])\s+", text), text


def test_validate_metrics_refuses_a_paper_file_with_a_no_motion_rate():
    m = _stopped_at_once("paper", "still")
    validate_metrics(m)
    with pytest.raises(ValueError, match="0.0 without motion"):
        validate_metrics({**m, "collision_rate": None})


def test_docs_name_every_declared_field():
    from humanclaw_gym.metrics import METRIC_SPECS

    text = DOCS.read_text()
    for spec in METRIC_SPECS:
        for field in spec.fields:
            top = field.name.split(".")[0]
            assert f"`{top}`" in text, f"docs/metrics.md does not describe {field.name}"
