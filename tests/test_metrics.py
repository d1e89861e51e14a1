"""Per-episode paper metrics: pure functions, trackers and the episode recorder.

Every expected value is constructed by hand from the definitions in docs/metrics.md.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from humanclaw_gym.body.skeleton import JOINT_INDEX, forward_kinematics, neutral_body22_m
from humanclaw_gym.metrics import (
    CollisionTracker,
    DisturbanceTracker,
    EpisodeMetricRecorder,
    EpisodeStart,
    FindTracker,
    InteractTracker,
    MotionAnomalyTracker,
    UsageTracker,
    body_to_target_aabb_distance,
    category_aliases,
    claims_target_visible,
    head_roll_rad,
    initial_penetration,
    is_collision_contact,
    joint_tracking_error_rad,
    motion_jerk,
    moving_average,
    pelvis_frame_positions,
    point_aabb_distance,
    root_rigid_joint_positions,
    spawn_floor_height,
    validate_metrics,
    write_metrics_json,
)
from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID
from humanclaw_gym.policy import Usage
from humanclaw_gym.skills import Skill

PELVIS, LEFT_HIP, LEFT_FOOT, HEAD, LEFT_HAND = 0, 1, 10, 15, 22


def contacts(*rows: tuple) -> np.ndarray:
    """Rows of (a, link_a, b, y_on_b[, distance]) -> CONTACT_DTYPE array."""
    out = np.zeros(len(rows), dtype=CONTACT_DTYPE)
    for i, row in enumerate(rows):
        a, link_a, b, y = row[:4]
        out[i]["a"], out[i]["link_a"], out[i]["b"], out[i]["link_b"] = a, link_a, b, -1
        out[i]["pos_a"] = (0.0, y, 0.0)
        out[i]["pos_b"] = (0.0, y, 0.0)
        out[i]["distance"] = row[4] if len(row) > 4 else 0.0
    return out


NO_CONTACTS = contacts()


# -- Find ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names", "expected"),
    [
        ("I see a sofa.", ["couch"], True),
        ("A couch is to the left.", ["couch"], True),
        ("Two couches ahead!", ["couch"], True),
        ("No bed here.", ["bed"], False),
        ("I can't see the bed.", ["bed"], False),
        ("I can\u2019t see the bed.", ["bed"], False),
        ("The bed isn't visible.", ["bed"], False),
        ("The beds aren't in this room.", ["bed"], False),
        ("The toilet doesn't appear in view.", ["toilet"], False),
        ("I couldn't find a toilet", ["toilet"], False),
        ("There is not a chair here.", ["chair"], False),
        ("I cannot locate the chair.", ["chair"], False),
        ("I don't see any chair.", ["chair"], False),
        ("Unable to spot the tv.", ["tv"], False),
        ("A room without a TV.", ["tv"], False),
        ("None of the objects is a bed.", ["bed"], False),
        ("The television is on the far wall.", ["tv"], True),
        ("A TV monitor is ahead.", ["tv"], True),
        ("A potted plant stands by the window.", ["potted_plant"], True),
        ("Some potted_plants near the door.", ["potted_plant"], True),
        ("A houseplant is visible.", ["potted_plant"], True),
        ("An armchair is in the corner.", ["chair"], True),
        ("The target is straight ahead.", ["bed"], True),
        # word boundaries: "bedroom" and "bedside" do not name a bed
        ("I am in a bedroom next to a bedside table.", ["bed"], False),
        # sentence split: the negation belongs to another sentence
        ("No chair here. The bed is straight ahead.", ["bed"], True),
        ("There is no chair.\nBed visible on the right", ["bed"], True),
        # a decimal point does not end a sentence
        ("There is no bed within 1.5 m", ["bed"], False),
        ("The sofa is 0.5 m away.", ["couch"], True),
        # other categories are not the target
        ("I see a chair.", ["bed"], False),
        ("", ["bed"], False),
        (None, ["bed"], False),
    ],
)
def test_claims_target_visible(text, names, expected):
    assert claims_target_visible(text, names, "strict") is expected


def test_category_aliases_table():
    assert category_aliases("couch", "strict") == ("couch", "sofa", "loveseat")
    assert category_aliases("potted_plant", "strict") == ("potted plant", "plant", "houseplant")
    assert category_aliases("tv", "strict") == ("tv", "television", "tv monitor")
    assert category_aliases("chair", "strict") == ("chair", "armchair")
    assert category_aliases("toilet", "strict") == ("toilet",)
    assert category_aliases("bed", "strict") == ("bed",)
    assert category_aliases("Coffee_Table", "strict") == ("coffee table",)
    with pytest.raises(ValueError, match="category"):
        category_aliases("")


def test_claims_target_visible_requires_names():
    with pytest.raises(ValueError, match="target_names"):
        claims_target_visible("I see a bed.", [])


def test_find_tracker_99_vs_100_pixels_and_same_step():
    tracker = FindTracker(["bed"], rules="strict")
    assert tracker.record(0, 99, "I see the bed.") is False
    assert not tracker.geo_find_success and not tracker.find_success
    # visible at step 1 but the claim is negated; the affirmation at step 2 has 0 pixels
    assert tracker.record(1, 100, "I can't see the bed.") is False
    assert tracker.geo_find_success and not tracker.find_success
    assert tracker.record(2, 0, "I see the bed.") is False
    assert not tracker.find_success
    assert tracker.record(3, 100, "I see the bed.") is True
    summary = tracker.summary()
    assert summary["first_geo_find_step"] == 1
    assert summary["first_find_step"] == 3
    assert summary["max_target_pixels"] == 100


# -- geometry ----------------------------------------------------------------------------------


def test_point_aabb_distance():
    points = np.array([[0.5, 0.5, 0.5], [2.0, 0.5, 0.5], [2.0, 3.0, 0.5], [-1.0, -1.0, -1.0]])
    d = point_aabb_distance(points, np.zeros(3), np.ones(3))
    np.testing.assert_allclose(d, [0.0, 1.0, math.hypot(1.0, 2.0), math.sqrt(3.0)])
    with pytest.raises(ValueError, match="min > max"):
        point_aabb_distance(points, np.ones(3), np.zeros(3))


def test_body_to_target_aabb_distance_min_over_points_and_targets():
    boxes = np.array([[[0, 0, 0], [1, 1, 1]], [[5, 0, 0], [6, 1, 1]]], dtype=float)
    points = np.array([[3.0, 0.5, 0.5], [4.5, 0.5, 0.5], [3.0, 3.0, 0.5]])
    assert body_to_target_aabb_distance(points, boxes) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="aabbs"):
        body_to_target_aabb_distance(points, np.zeros((2, 3)))


# -- Motion Jerk -------------------------------------------------------------------------------

FPS, S = 30.0, 8


def root_path(x: np.ndarray, rotvec=(0.0, 0.0, 0.0)) -> np.ndarray:
    frames = np.zeros((len(x), 75))
    frames[:, 0] = x
    frames[:, 1] = 0.9
    frames[:, 3:6] = rotvec
    return frames


def test_root_rigid_joint_positions_rotates_the_neutral_body():
    frames = root_path(np.array([1.0]), rotvec=(0.0, math.pi / 2, 0.0))
    joints = root_rigid_joint_positions(frames)[0]
    body = neutral_body22_m()
    # +90 deg about +Y maps (x, y, z) -> (z, y, -x)
    expected = np.stack([body[:, 2], body[:, 1], -body[:, 0]], axis=1) + [1.0, 0.9, 0.0]
    np.testing.assert_allclose(joints, expected, atol=1e-12)


def test_moving_average_edge_padding():
    out = moving_average(np.array([0.0, 3.0, 6.0, 12.0]))
    np.testing.assert_allclose(out, [1.0, 3.0, 7.0, 10.0])
    np.testing.assert_allclose(moving_average(np.arange(4.0), 1), np.arange(4.0))
    with pytest.raises(ValueError, match="window"):
        moving_average(np.arange(4.0), 2)


def test_moving_average_sums_as_the_reference_does():
    """Differences of a running sum, divided by the width: the last element is 1.1 exactly
    (the reference's value); adding the three neighbours directly gives 1.0999999999999999."""
    out = moving_average(np.array([0.1, 0.2, 0.7, 1.3]))
    assert out.tolist() == [0.13333333333333333, 0.3333333333333333, 0.7333333333333334, 1.1]


def _translation_paths() -> dict[str, np.ndarray]:
    t = np.arange(60.0)
    jitter = root_path(3.0 + 0.4 / 15 * t + 0.013 * (t % 5))
    jitter[:, 1], jitter[:, 2] = 0.95, -7.25 + 0.01 * (t % 3)
    accel = root_path(0.2 / 15 * t[:40] ** 2 / 10)
    accel[:, 1], accel[:, 2] = 1.05, 11.0 - 0.031 * t[:40]
    return {"jitter": jitter, "accelerating": accel}


def test_motion_jerk_is_the_reference_value_to_the_last_bit():
    """What the reference release's Motion Jerk gives for two translation-only paths (no
    sine or cosine in the input or the rotation, so the values do not depend on the
    platform's maths library); the earlier summation order gave 2.8183920010567145 and
    0.15471934322058642."""
    paths = _translation_paths()
    assert motion_jerk(paths["jitter"]) == 2.818392001056684
    assert motion_jerk(paths["accelerating"]) == 0.15471934322171782


def test_motion_jerk_rotations_below_1e8_rad_are_the_identity():
    body = neutral_body22_m()
    for rotvec in ((5e-9, 0.0, 0.0), (3e-9, 0.0, -4e-9), (0.0, 9.9e-9, 0.0)):
        joints = root_rigid_joint_positions(root_path(np.zeros(1), rotvec=rotvec))[0]
        assert np.array_equal(joints, body + [0.0, 0.9, 0.0])  # exactly, as the reference
    tilted = root_rigid_joint_positions(root_path(np.zeros(1), rotvec=(2e-8, 0.0, 0.0)))[0]
    assert not np.array_equal(tilted, body + [0.0, 0.9, 0.0])
    # a standing episode whose root rotation jitters below the cutoff scores as if still
    t = np.arange(30.0)
    still = root_path(1e-3 * t)
    jitter = still.copy()
    jitter[:, 3], jitter[:, 5] = 3e-9 * np.cos(t), 4e-9 * np.sin(t)
    assert motion_jerk(jitter) == motion_jerk(still)


def test_motion_jerk_static_and_constant_velocity():
    n = np.arange(60)
    # a motionless body (any fixed orientation) has no jerk
    assert motion_jerk(root_path(np.zeros(60), rotvec=(0.1, 0.7, -0.2))) == pytest.approx(
        0.0, abs=1e-9
    )
    v = 1.0  # m/s
    x = v * n / FPS
    # without smoothing a constant-velocity path has exactly zero jerk
    assert motion_jerk(root_path(x), window=1) == pytest.approx(0.0, abs=1e-9)
    # with the width-3 edge-padded smoothing, only the two end windows see the padding:
    # the smoothed first frame is v/(3 fps) ahead of the raw one, the last v/(3 fps) behind,
    # so |J| = (v / (3 fps)) / (s/fps)^3 at t = 0 and at t = T-1-3s, and 0 elsewhere.
    edge = (v / (3 * FPS)) / (S / FPS) ** 3
    expected = 2 * edge / (60 - 3 * S)
    assert motion_jerk(root_path(x)) == pytest.approx(expected, rel=1e-9)


def test_motion_jerk_constant_jerk_path():
    j = 2.5  # m/s^3
    T = 60
    n = np.arange(T)
    x = j * (n / FPS) ** 3 / 6.0
    # no smoothing: the third difference of a cubic is exact
    assert motion_jerk(root_path(x), window=1) == pytest.approx(j, rel=1e-9)
    # smoothing adds 2 t h^2 (linear, no jerk) inside; the edge padding changes the two
    # end samples: y[0] = x[1] / 3 instead of 0, y[N] = (x[N-1] + 2 x[N]) / 3.
    N = T - 1
    h3 = (S / FPS) ** 3
    e0 = (j / 6.0) * (1.0 / FPS) ** 3 / 3.0
    eN = (j / 6.0) * ((N / FPS) ** 3 - ((N + 1) / FPS) ** 3) / 3.0
    first = abs(j - e0 / h3)
    last = abs(j + eN / h3)
    expected = ((T - 3 * S - 2) * j + first + last) / (T - 3 * S)
    assert motion_jerk(root_path(x)) == pytest.approx(expected, rel=1e-9)
    # with numbers: e0/h3 = j / (18 s^3), eN/h3 = -j (3N^2 + 3N + 1) / (18 s^3)
    assert first == pytest.approx(j * (1 - 1 / (18 * 512)), rel=1e-12)
    assert last == pytest.approx(abs(j * (1 - 10621 / 9216)), rel=1e-9)


def test_motion_jerk_too_short_and_bad_input():
    assert motion_jerk(root_path(np.zeros(3 * S))) is None
    assert motion_jerk(root_path(np.zeros(3 * S + 1))) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match=r"\(T, 75\)"):
        motion_jerk(np.zeros((40, 74)))
    with pytest.raises(ValueError, match="stride"):
        motion_jerk(root_path(np.zeros(40)), stride=0)


# -- collision ---------------------------------------------------------------------------------

FLOOR = 0.3
TABLE, STAIR, BOX_A, BOX_B, BOX_C, BOX_D = 2, 3, 10, 11, 12, 13
DYNAMIC = (BOX_A, BOX_B, BOX_C, BOX_D)


def test_collision_threshold_is_strictly_above_floor_plus_0_0205():
    low = contacts((HUMAN_ID, LEFT_FOOT, STAIR, FLOOR + 0.0204))[0]
    high = contacts((HUMAN_ID, LEFT_FOOT, STAIR, FLOOR + 0.0206))[0]
    assert not is_collision_contact(low, DYNAMIC, FLOOR)
    assert is_collision_contact(high, DYNAMIC, FLOOR)
    # a dynamic object is disturbance, never a fixed collision; object-object rows never count
    assert not is_collision_contact(contacts((HUMAN_ID, LEFT_HAND, BOX_A, 1.0))[0], DYNAMIC, FLOOR)
    assert not is_collision_contact(contacts((TABLE, -1, STAIR, 1.0))[0], DYNAMIC, FLOOR)


def test_collision_tracker_steps_and_body_groups():
    tracker = CollisionTracker(DYNAMIC, FLOOR)
    # step 0: two frames touch the table with the hand -> one colliding step
    tracker.record_frame(0, contacts((HUMAN_ID, LEFT_HAND, TABLE, 1.0)))
    tracker.record_frame(0, contacts((HUMAN_ID, LEFT_HAND, TABLE, 1.1)))
    # step 1: feet on the floor only, a box pushed high up -> no collision
    tracker.record_frame(1, contacts((HUMAN_ID, LEFT_FOOT, 1, FLOOR), (HUMAN_ID, HEAD, BOX_A, 1.6)))
    # step 2: head hits a shelf and the foot hits a stair in the same step
    tracker.record_frame(2, contacts((HUMAN_ID, HEAD, TABLE, 1.6)))
    tracker.record_frame(2, contacts((HUMAN_ID, LEFT_FOOT, STAIR, FLOOR + 0.15)))
    # step 3: a frame without contacts still makes it a motion step
    tracker.record_frame(3, NO_CONTACTS)
    s = tracker.summary()
    assert s["motion_steps"] == 4
    assert s["collision_steps"] == 2
    assert s["collision_rate"] == pytest.approx(2 / 4)
    assert s["collision_steps_by_group"] == {"arm/hand": 1, "torso": 0, "leg/foot": 1, "head": 1}
    assert s["collision_rate_by_group"]["head"] == pytest.approx(1 / 4)
    assert s["collision_rate_by_group"]["torso"] == 0.0


def test_collision_tracker_without_motion_has_no_rate_under_strict_rules():
    s = CollisionTracker(DYNAMIC, FLOOR, rules="strict").summary()
    assert s["motion_steps"] == 0 and s["collision_rate"] is None
    assert all(v is None for v in s["collision_rate_by_group"].values())


def test_collision_rejects_non_humanoid_link():
    with pytest.raises(ValueError, match="link_a"):
        CollisionTracker(DYNAMIC, FLOOR).record_frame(0, contacts((HUMAN_ID, 24, TABLE, 1.0)))


def test_spawn_floor_height():
    # hits: a rug under the feet (0.01), the floor (0.0), a table top above the body (0.75)
    assert spawn_floor_height([0.75, 0.0, 0.01], body_lowest_y=0.0) == 0.01
    assert spawn_floor_height([0.04, 0.0], body_lowest_y=0.0) == 0.04
    assert spawn_floor_height([0.06, 0.0], body_lowest_y=0.0) == 0.0
    with pytest.raises(ValueError, match="no floor"):
        spawn_floor_height([0.5], body_lowest_y=0.0)


def test_initial_penetration():
    rows = contacts(
        (HUMAN_ID, LEFT_FOOT, 1, 0.0, -0.004),
        (HUMAN_ID, PELVIS, TABLE, 0.5, -0.012),
        (BOX_A, -1, BOX_B, 0.5, -0.2),  # object-object rows are not the humanoid's
    )
    assert initial_penetration(rows) == pytest.approx(0.012)
    assert initial_penetration(contacts((HUMAN_ID, LEFT_FOOT, 1, 0.0, 0.003))) == 0.0
    assert initial_penetration(NO_CONTACTS) == 0.0


# -- disturbance -------------------------------------------------------------------------------


def test_disturbance_chain_in_time_order_and_no_backward_spread():
    tracker = DisturbanceTracker(DYNAMIC)
    ids = [BOX_A, BOX_B, BOX_C, BOX_D]
    pos = {k: np.array([float(i), 0.0, 0.0]) for i, k in enumerate(ids)}

    def frame(rows, moves):
        for k, dx in moves.items():
            pos[k] = pos[k] + [dx, 0.0, 0.0]
        return tracker.record_frame(rows, ids, np.stack([pos[k] for k in ids]))

    # frame 0: D touches B while B is not affected yet; nothing is affected
    assert frame(contacts((BOX_B, -1, BOX_D, 0.5)), {BOX_D: 0.5}) == []
    # frame 1: the human pushes A (A moves 0.1 in this frame: before its first frame, not counted)
    assert frame(contacts((HUMAN_ID, LEFT_HAND, BOX_A, 1.0)), {BOX_A: 0.1}) == [BOX_A]
    # frame 2: A touches B -> B affected; A moves 0.2
    assert frame(contacts((BOX_A, -1, BOX_B, 0.5)), {BOX_A: 0.2, BOX_B: 0.05}) == [BOX_B]
    # frame 3: B touches C -> C affected; everything moves a bit, D too (D stays unaffected)
    assert frame(
        contacts((BOX_B, -1, BOX_C, 0.5)), {BOX_A: 0.3, BOX_B: 0.1, BOX_C: 0.4, BOX_D: 1.0}
    ) == [BOX_C]
    # frame 4: C moves 0.25 more, nobody touches anything
    assert frame(NO_CONTACTS, {BOX_C: 0.25}) == []
    s = tracker.summary()
    assert s["affected_object_count"] == 3
    assert s["direct_affected_object_count"] == 1
    assert s["affected_object_first_frame"] == {"10": 1, "11": 2, "12": 3}
    lengths = s["affected_object_path_length_m"]
    assert lengths["10"] == pytest.approx(0.2 + 0.3)
    assert lengths["11"] == pytest.approx(0.1)
    assert lengths["12"] == pytest.approx(0.25)
    assert "13" not in lengths
    assert s["affected_path_length_sum_m"] == pytest.approx(0.5 + 0.1 + 0.25)


def test_disturbance_spreads_within_the_same_frame():
    tracker = DisturbanceTracker(DYNAMIC)
    rows = contacts(
        (BOX_B, -1, BOX_C, 0.5), (HUMAN_ID, LEFT_HAND, BOX_A, 1.0), (BOX_A, -1, BOX_B, 0.5)
    )
    ids = [BOX_A, BOX_B, BOX_C]
    assert tracker.record_frame(rows, ids, np.zeros((3, 3))) == [BOX_A, BOX_B, BOX_C]
    # a static object touched by the human is not a dynamic object: ignored
    tracker.record_frame(contacts((HUMAN_ID, LEFT_HAND, TABLE, 1.0)), ids, np.zeros((3, 3)))
    assert tracker.summary()["affected_object_count"] == 3


def test_disturbance_shape_check():
    with pytest.raises(ValueError, match="object_positions"):
        DisturbanceTracker(DYNAMIC).record_frame(NO_CONTACTS, [BOX_A], np.zeros((2, 3)))


# -- interact ----------------------------------------------------------------------------------

TARGET, OTHER_SEAT = 5, 6


def sit_chunk(tracker: InteractTracker, step: int, per_frame: list[np.ndarray], skill=Skill.SIT):
    for i, rows in enumerate(per_frame):
        tracker.record_frame(step, skill, rows, last_in_chunk=i == len(per_frame) - 1)


ON_TARGET = contacts((HUMAN_ID, PELVIS, TARGET, 0.45))


def test_geo_interact_needs_contact_on_the_last_frame_of_a_sit():
    # contact only in the middle of the chunk: does not count
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [NO_CONTACTS, ON_TARGET, NO_CONTACTS])
    assert not t.geo_interact_success and t.sit_chunks == 1
    # pelvis on a different seat at the end: does not count
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [NO_CONTACTS, contacts((HUMAN_ID, PELVIS, OTHER_SEAT, 0.45))])
    assert not t.geo_interact_success
    # a hip (not the pelvis) on the target: does not count
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [NO_CONTACTS, contacts((HUMAN_ID, LEFT_HIP, TARGET, 0.45))])
    assert not t.geo_interact_success
    # pelvis on the target on the last frame: counts
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [NO_CONTACTS, ON_TARGET])
    assert t.geo_interact_success
    # the same contact at the end of a Walk chunk is not a Sit
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [ON_TARGET], skill=Skill.WALK)
    assert not t.geo_interact_success and t.sit_chunks == 0


def test_interact_needs_sit_stop_and_contact_on_the_last_motion():
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [ON_TARGET])
    assert t.interact_success(active_stop=True)
    assert not t.interact_success(active_stop=False)
    # standing up again (a Step back whose last frame has no contact) before Stop
    sit_chunk(t, 1, [ON_TARGET, NO_CONTACTS], skill=Skill.STEP_BACK)
    assert not t.interact_success(active_stop=True)
    assert t.geo_interact_success
    # contact at the end without any Sit
    t = InteractTracker([TARGET])
    sit_chunk(t, 0, [ON_TARGET], skill=Skill.SIDE_STEP)
    assert not t.interact_success(active_stop=True)


# -- usage -------------------------------------------------------------------------------------


def test_usage_tracker_sums_and_labels():
    t = UsageTracker()
    assert t.source == "none"
    t.record([Usage("planner", 1, 100, 20, 5), Usage("planner", 2, 110, 30, 0)])
    t.record([Usage("verifier", 1, 50, 4, 7)])
    s = t.summary()
    assert (s["input_tokens"], s["output_tokens"], s["reasoning_tokens"], s["calls"]) == (
        260,
        54,
        12,
        3,
    )
    assert s["source"] == "provider"

    est = UsageTracker()
    est.record([Usage("planner", 1, 40, 10, 0, source="estimated_chars_div_4")])
    assert est.source == "estimated_chars_div_4"

    mixed = UsageTracker()
    mixed.record([Usage("planner", 1, 40, 10, 0, source="estimated_chars_div_4")])
    mixed.record([Usage("verifier", 1, 40, 10, 0)])
    assert mixed.source == "mixed"
    with pytest.raises(ValueError, match="source"):
        UsageTracker().record([object()])


# -- the episode recorder ----------------------------------------------------------------------

TARGET_BOX = np.array([[[0.0, 0.0, 0.0], [1.0, 0.5, 1.0]]])


def make_recorder(interact=True, category="couch", **kw) -> EpisodeMetricRecorder:
    args = dict(
        episode_id="ep1",
        scene_id="scene_a",
        category=category,
        target_ids=[TARGET],
        target_aabbs=TARGET_BOX,
        interact=interact,
        dynamic_ids=DYNAMIC,
        floor_height_m=0.0,
        initial_penetration_m=0.0,
        difficulty="easy",
    )
    args.update(kw)
    return EpisodeMetricRecorder(EpisodeStart(**args))


def test_episode_and_outcome_trackers_write_their_fields_in_spec_order():
    """The benchmark's ``episode`` tracker is the shared ``outcome`` tracker with the target
    fields after ``rollout_index``; each summary follows its spec (the metrics.json order)."""
    from humanclaw_gym.metrics.outcome import EpisodeMetric, OutcomeMetric
    from humanclaw_gym.metrics.tracker import EpisodeEnd

    start = EpisodeStart(
        episode_id="ep1",
        scene_id="scene_a",
        category="couch",
        target_ids=[TARGET],
        target_aabbs=TARGET_BOX,
        interact=True,
        dynamic_ids=DYNAMIC,
        floor_height_m=0.0,
        initial_penetration_m=0.0,
        difficulty="easy",
        rollout_index=2,
    )
    end = EpisodeEnd("stop", 5, np.zeros((1, 3)))
    summaries = {}
    for cls in (EpisodeMetric, OutcomeMetric):
        tracker = cls()
        tracker.on_reset(start)
        summaries[cls] = tracker.summary(end)
        assert list(summaries[cls]) == [f.name for f in cls.spec.fields]
        assert cls.check({**summaries[cls], "ended_by": "truncated"}) is not None
    assert summaries[EpisodeMetric] == {
        **summaries[OutcomeMetric],
        "category": "couch",
        "difficulty": "easy",
        "interact": True,
        "target_ids": [TARGET],
    }
    assert summaries[OutcomeMetric] == {
        "rules": start.rules,
        "episode_id": "ep1",
        "scene_id": "scene_a",
        "rollout_index": 2,
        "ended_by": "stop",
        "active_stop": True,
        "steps": 5,
    }


def body_at(x: float) -> np.ndarray:
    """Body points whose nearest one is at distance x - 1 from the target box (x > 1)."""
    return np.array([[x, 0.25, 0.5], [x + 0.3, 0.9, 0.5], [x + 0.1, 1.5, 0.5]])


def run_motion(rec, step, skill, per_frame, usage=(), pixels=0, text=None, realized=None):
    """One motion decision; ``realized`` (default: exactly the generated frames) are the
    physics frames handed to the recorder."""
    rec.record_decision(step, pixels, text, skill, usage)
    frames = np.zeros((len(per_frame), 75))
    frames[:, 1] = 0.9
    rec.record_generated_chunk(step, frames)
    realized = frames if realized is None else realized
    for i, rows in enumerate(per_frame):
        rec.record_frame(
            step, skill, i, i == len(per_frame) - 1, rows, [BOX_A], np.zeros((1, 3)), realized[i]
        )


@pytest.mark.parametrize(
    ("x", "ended_by", "nav20", "geo20", "nav1m"),
    [
        (1.19, "stop", True, True, True),
        (1.21, "stop", False, False, True),
        (1.999, "stop", False, False, True),
        (2.0, "stop", False, False, False),  # NavSR@1m needs strictly < 1 m
        (1.1, "truncated", False, True, False),  # the step limit is not an active stop
        (1.1, "error", False, True, False),
    ],
)
def test_nav_success(x, ended_by, nav20, geo20, nav1m):
    rec = make_recorder(interact=False, category="chair")
    run_motion(rec, 0, Skill.WALK, [NO_CONTACTS])
    if ended_by == "stop":
        rec.record_decision(1, 0, None, Skill.STOP, ())
    m = rec.finalize(body_at(x), ended_by)
    assert m["final_distance_m"] == pytest.approx(x - 1.0)
    assert (m["nav_success_20cm"], m["geo_nav_success_20cm"], m["nav_success_1m"]) == (
        nav20,
        geo20,
        nav1m,
    )
    assert m["active_stop"] is (ended_by == "stop")
    assert m["interact_success"] is None and m["geo_interact_success"] is None


def test_recorder_full_interact_episode_and_json_roundtrip(tmp_path):
    rec = make_recorder(initial_penetration_m=0.015)
    planner = [Usage("planner", 1, 1000, 50, 10)]
    # step 0: target partly visible (99 px) and claimed -> no find
    run_motion(rec, 0, Skill.WALK, [NO_CONTACTS] * 15, planner, pixels=99, text="I see a sofa.")
    # step 1: 100 px and claimed -> find; the hand brushes a shelf (collision) and pushes box A
    run_motion(
        rec, 1, Skill.TURN,
        [contacts((HUMAN_ID, LEFT_HAND, TABLE, 1.0), (HUMAN_ID, LEFT_HAND, BOX_A, 1.0))] + [NO_CONTACTS] * 14,
        planner, pixels=100, text="The sofa is ahead.",
    )  # fmt: skip
    # step 2: sit, pelvis on the couch on the last frame
    run_motion(
        rec,
        2,
        Skill.SIT,
        [NO_CONTACTS] * 14 + [ON_TARGET],
        planner,
        pixels=400,
        text="On the couch.",
    )
    rec.record_decision(3, 500, "I am sitting on the couch.", Skill.STOP, planner)
    m = rec.finalize(body_at(1.05), "stop")
    assert m["schema"] == "humanclaw_metrics_v2" and m["rules"] == "paper"
    assert m["rollout_index"] == 0 and m["floor_source"] == "spawn_raycast"
    assert m["motion_anomaly"] == 0 and m["max_joint_tracking_error_deg"] == 0.0
    assert m["find_success"] and m["geo_find_success"] and m["first_find_step"] == 1
    assert m["interact_success"] is True and m["geo_interact_success"] is True
    assert m["nav_success_20cm"] is True
    # the published rule has no exception for the target: the pelvis resting on the couch
    # seat (0.45 m above the floor) is a fixed-geometry contact of the torso too
    assert (m["steps"], m["motion_steps"], m["collision_steps"]) == (4, 3, 2)
    assert m["collision_rate"] == pytest.approx(2 / 3)
    assert m["collision_rate_by_group"]["arm/hand"] == pytest.approx(1 / 3)
    assert m["collision_rate_by_group"]["torso"] == pytest.approx(1 / 3)
    assert m["affected_object_count"] == 1
    assert m["generated_frames"] == 45
    assert m["motion_jerk_m_s3"] == pytest.approx(0.0, abs=1e-9)
    assert m["initial_penetration_m"] == 0.015 and m["initial_penetration_flag"] is True
    assert m["tokens"]["input_tokens"] == 4000 and m["tokens"]["output_tokens"] == 200
    assert m["tokens"]["reasoning_tokens"] == 40 and m["tokens"]["source"] == "provider"
    assert m["tokens"]["input_tokens_per_step"] == 1000
    validate_metrics(m)
    path = write_metrics_json(tmp_path / "run" / "metrics.json", m)
    assert json.loads(path.read_text()) == m
    assert [p.name for p in path.parent.iterdir()] == ["metrics.json"]
    with pytest.raises(RuntimeError, match="finalized"):
        rec.finalize(body_at(1.05), "stop")


# -- motion tracking / motion_anomaly ----------------------------------------------------------


def _with_joint(frame: np.ndarray, joint: str, rotvec) -> np.ndarray:
    out = frame.copy()
    j = JOINT_INDEX[joint]
    out[3 + 3 * j : 6 + 3 * j] = rotvec
    return out


def test_joint_tracking_error_is_the_local_rotation_angle():
    rest = np.zeros(75)
    knocked = _with_joint(rest, "right_shoulder", (0.0, math.radians(40.0), 0.0))
    err = joint_tracking_error_rad(rest, knocked)
    assert err.shape == (23,)
    assert np.degrees(err[JOINT_INDEX["right_shoulder"] - 1]) == pytest.approx(40.0)
    assert np.count_nonzero(err) == 1
    # the root is not a joint here: moving and turning the body changes nothing
    moved = knocked.copy()
    moved[0:6] = (3.0, 0.2, -1.0, 0.0, 1.0, 0.0)
    assert np.allclose(joint_tracking_error_rad(rest, moved), err)
    # the same rotation written as (2 pi - a) about the opposite axis: 0 error (shortest arc)
    a = math.radians(170.0)
    one = _with_joint(rest, "neck", (a, 0.0, 0.0))
    same = _with_joint(rest, "neck", (-(2 * math.pi - a), 0.0, 0.0))
    assert joint_tracking_error_rad(one, same).max() == pytest.approx(0.0, abs=1e-7)
    # batches
    assert joint_tracking_error_rad(np.stack([rest, rest]), np.stack([rest, knocked])).shape == (
        2,
        23,
    )
    with pytest.raises(ValueError, match="one shape"):
        joint_tracking_error_rad(rest, np.stack([rest, rest]))
    with pytest.raises(ValueError, match="finite"):
        joint_tracking_error_rad(rest, np.full(75, np.nan))


def test_pelvis_frame_positions_do_not_depend_on_where_the_body_stands():
    frame = _with_joint(np.zeros(75), "left_shoulder", (0.0, 0.0, -1.2))
    elsewhere = frame.copy()
    elsewhere[0:6] = (2.0, 1.0, -3.0, 0.0, 2.0, 0.0)  # moved and turned 115 degrees
    assert np.allclose(pelvis_frame_positions(frame), pelvis_frame_positions(elsewhere))
    world, _ = forward_kinematics(frame)
    assert np.allclose(pelvis_frame_positions(frame), world - world[0])


def test_head_roll():
    upright = np.zeros(75)
    upright[3:6] = (0.0, 2.5, 0.0)  # any yaw
    assert head_roll_rad(upright) == pytest.approx(0.0, abs=1e-12)
    nodding = _with_joint(upright, "neck", (0.5, 0.0, 0.0))  # pitch only
    assert head_roll_rad(nodding) == pytest.approx(0.0, abs=1e-12)
    rolled = _with_joint(np.zeros(75), "neck", (0.0, 0.0, math.radians(-12.0)))
    assert math.degrees(abs(float(head_roll_rad(rolled)))) == pytest.approx(12.0)


def test_motion_anomaly_tracker_counts_frames_over_the_bound():
    rest = np.zeros(75)
    tracker = MotionAnomalyTracker()
    assert tracker.summary() == {"motion_anomaly": 0, "max_joint_tracking_error_deg": None}
    assert not tracker.record_frame(rest, _with_joint(rest, "left_wrist", (0.0, 0.0, 0.5)))
    # exactly at the bound is not an anomaly (strictly greater)
    at = _with_joint(rest, "head", (math.radians(30.0), 0.0, 0.0))
    assert not tracker.record_frame(rest, at)
    over = _with_joint(rest, "right_shoulder", (0.0, 0.0, math.radians(95.0)))
    assert tracker.record_frame(rest, over)
    s = tracker.summary()
    assert s["motion_anomaly"] == 1 and s["max_joint_tracking_error_deg"] == pytest.approx(95.0)
    assert tracker.frames == 3
    with pytest.raises(ValueError, match="single"):
        tracker.record_frame(np.stack([rest, rest]), np.stack([rest, rest]))
    with pytest.raises(ValueError, match="bound_deg"):
        MotionAnomalyTracker(bound_deg=0.0)


def test_recorder_counts_motion_anomaly_against_the_generated_chunk():
    rec = make_recorder(interact=False, category="chair")
    generated = np.zeros((15, 75))
    generated[:, 1] = 0.9
    realized = generated.copy()
    # frames 5-7: the right upper arm is knocked 60 degrees away from its command
    for i in (5, 6, 7):
        realized[i] = _with_joint(realized[i], "right_shoulder", (math.radians(60.0), 0.0, 0.0))
    realized[9] = _with_joint(realized[9], "left_elbow", (0.0, math.radians(20.0), 0.0))
    run_motion(rec, 0, Skill.WALK, [NO_CONTACTS] * 15, realized=realized)
    rec.record_decision(1, 0, None, Skill.STOP, ())
    m = rec.finalize(body_at(3.0), "stop")
    assert m["motion_anomaly"] == 3
    assert m["max_joint_tracking_error_deg"] == pytest.approx(60.0)
    assert m["thresholds"]["motion_anomaly_bound_deg"] == 30.0
    validate_metrics(m)


@pytest.mark.parametrize("rules, empty", [("strict", None), ("paper", 0.0)])
def test_recorder_stop_without_motion_rates(rules, empty):
    rec = make_recorder(interact=False, category="tv", rules=rules)
    rec.record_decision(0, 0, None, Skill.STOP, ())
    m = rec.finalize(body_at(3.0), "stop")
    assert m["motion_steps"] == 0 and m["collision_rate"] == empty
    assert set(m["collision_rate_by_group"].values()) == {empty}
    assert m["motion_jerk_m_s3"] is None and m["tokens"]["source"] == "none"
    assert m["motion_anomaly"] == 0 and m["max_joint_tracking_error_deg"] is None
    assert m["steps"] == 1 and m["rules"] == rules
    validate_metrics(m)


def test_recorder_rejects_out_of_order_events():
    rec = make_recorder()
    pose = np.zeros(75)
    with pytest.raises(ValueError, match="record_decision first"):
        rec.record_frame(0, Skill.WALK, 0, False, NO_CONTACTS, [], np.zeros((0, 3)), pose)
    rec.record_decision(0, 0, None, Skill.WALK, ())
    with pytest.raises(ValueError, match="frame_index must be 0"):
        rec.record_frame(0, Skill.WALK, 1, False, NO_CONTACTS, [], np.zeros((0, 3)), pose)
    with pytest.raises(ValueError, match="differs"):
        rec.record_frame(0, Skill.SIT, 0, False, NO_CONTACTS, [], np.zeros((0, 3)), pose)
    with pytest.raises(ValueError, match="no generated chunk"):
        rec.record_frame(0, Skill.WALK, 0, False, NO_CONTACTS, [], np.zeros((0, 3)), pose)
    with pytest.raises(ValueError, match="frames_75"):
        rec.record_generated_chunk(0, np.zeros((15, 70)))
    rec.record_generated_chunk(0, np.zeros((2, 75)))
    with pytest.raises(ValueError, match="realized_75"):
        rec.record_frame(0, Skill.WALK, 0, False, NO_CONTACTS, [], np.zeros((0, 3)), pose[:70])
    with pytest.raises(ValueError, match="step must increase"):
        rec.record_decision(0, 0, None, Skill.WALK, ())
    with pytest.raises(ValueError, match="skill"):
        rec.record_decision(1, 0, None, 9, ())
    with pytest.raises(ValueError, match="already has a generated chunk"):
        rec.record_generated_chunk(0, np.zeros((15, 75)))
    with pytest.raises(ValueError, match="ended_by='stop'"):
        rec.finalize(body_at(2.0), "stop")
    rec.record_decision(1, 0, None, Skill.STOP, ())
    with pytest.raises(RuntimeError, match="after the Stop"):
        rec.record_decision(2, 0, None, Skill.WALK, ())
    with pytest.raises(ValueError, match="truncated"):
        rec.finalize(body_at(2.0), "truncated")


def test_recorder_constructor_checks():
    with pytest.raises(ValueError, match="target_aabbs"):
        make_recorder(target_aabbs=np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match="target_ids"):
        make_recorder(target_ids=[], target_aabbs=np.zeros((0, 2, 3)))
    with pytest.raises(ValueError, match="initial_penetration_m"):
        make_recorder(initial_penetration_m=-0.1)
    with pytest.raises(ValueError, match="dynamic_ids"):
        make_recorder(dynamic_ids=[0])


def _chunk_inputs(seed: int, n: int = 15):
    """One decision's varied frame inputs: contacts (hand on the table, a box pushed, a
    foot on the floor), moving object positions and realized frames off the generated."""
    rng = np.random.default_rng(seed)
    rows = [
        contacts(
            *([(HUMAN_ID, LEFT_HAND, TABLE, 1.0 + 0.01 * i)] if i % 3 else []),
            *([(HUMAN_ID, HEAD, BOX_A, 1.6, -0.002 * i)] if i > 7 else []),
            (HUMAN_ID, LEFT_FOOT, 1, FLOOR),
        )
        for i in range(n)
    ]
    positions = np.cumsum(rng.normal(0.0, 0.01, (n, len(DYNAMIC), 3)), axis=0)
    realized = np.zeros((n, 75))
    realized[:, 1] = 0.9
    realized[:, 3:] = rng.normal(0.0, 0.05, (n, 72))
    return rows, positions, realized


def test_record_frames_gives_the_metrics_of_frame_by_frame():
    """Frames handed over in groups (record_frames) give the trackers the very inputs of
    record_frame on each in order: the metrics JSON is byte-identical."""
    out = []
    for groups in ([1] * 15, [15], [4, 11], [1, 13, 1]):
        rec = make_recorder()
        for step, skill in enumerate((Skill.WALK, Skill.TURN, Skill.WALK)):
            rows, positions, realized = _chunk_inputs(step)
            rec.record_decision(step, 10 * step, None, skill)
            generated = np.zeros((15, 75))
            generated[:, 1] = 0.9
            rec.record_generated_chunk(step, generated)
            start = 0
            for size in groups:
                end = start + size
                if size == 1:
                    rec.record_frame(
                        step, skill, start, end == 15, rows[start], DYNAMIC, positions[start],
                        realized[start],
                    )  # fmt: skip
                else:
                    rec.record_frames(
                        step, skill, start, end == 15, rows[start:end], DYNAMIC,
                        positions[start:end], realized[start:end],
                    )  # fmt: skip
                start = end
        rec.record_decision(3, 0, "I see the couch.", Skill.STOP)
        out.append(json.dumps(rec.finalize(body_at(1.1), "stop"), sort_keys=True))
    assert all(text == out[0] for text in out[1:])
    assert json.loads(out[0])["steps"] == 4


def test_record_frames_checks_every_frame_before_any_tracker_sees_one():
    rec = make_recorder()
    rows, positions, realized = _chunk_inputs(0)
    rec.record_decision(0, 0, None, Skill.WALK)
    rec.record_generated_chunk(0, np.zeros((15, 75)))
    bad = realized.copy()
    bad[9, 5] = np.nan
    with pytest.raises(ValueError, match="finite"):
        rec.record_frames(0, Skill.WALK, 0, True, rows, DYNAMIC, positions, bad)
    with pytest.raises(ValueError, match=r"object_positions must have shape \(15, 4, 3\)"):
        rec.record_frames(0, Skill.WALK, 0, True, rows, DYNAMIC, positions[:, :2], realized)
    with pytest.raises(ValueError, match=r"frame_index must be 0 \(frames arrive in order\)"):
        rec.record_frames(0, Skill.WALK, 1, True, rows, DYNAMIC, positions, realized)
    # nothing was recorded: the chunk is still expected from frame 0
    rec.record_frames(0, Skill.WALK, 0, False, rows[:4], DYNAMIC, positions[:4], realized[:4])
    more = np.r_[realized[4:], realized[:1]]  # 12 frames from index 4: past the chunk
    with pytest.raises(ValueError, match="frame_index must be < 15"):
        rec.record_frames(0, Skill.WALK, 4, True, rows[4:] + rows[:1], DYNAMIC,
                          np.r_[positions[4:], positions[:1]], more)  # fmt: skip
    rec.record_frames(0, Skill.WALK, 4, True, rows[4:], DYNAMIC, positions[4:], realized[4:])
    with pytest.raises(ValueError, match="already received its last_in_chunk frame"):
        rec.record_frames(0, Skill.WALK, 15, True, rows[:1], DYNAMIC, positions[:1], realized[:1])
