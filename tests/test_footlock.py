"""Foot-contact cleanup (two-bone leg IK) used by the learned generator's Sit down."""

from __future__ import annotations

import numpy as np
import pytest

from humanclaw_gym.body.skeleton import JOINT_INDEX, forward_kinematics
from humanclaw_gym.motion.footlock import lock_planted_feet, planted_mask
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

_LEG_JOINTS = ("left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")
_LEG_COLUMNS = np.concatenate(
    [np.arange(6 + 3 * (JOINT_INDEX[j] - 1), 9 + 3 * (JOINT_INDEX[j] - 1)) for j in _LEG_JOINTS]
)


def _sit_with_skating_feet() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A procedural Sit down whose hips get a per-frame wobble: the feet skate while the
    body sits (what a noisy learned chunk looks like)."""
    gen = ProceduralMotionGenerator()
    history = gen.reset(np.zeros(3), 0.0, seed=0)
    clean = gen.generate("Sit down<0.45>")
    noisy = clean.copy()
    wobble = 0.06 * np.sin(np.arange(len(clean)) * 2.1)
    for hip in ("left_hip", "right_hip"):
        noisy[:, 6 + 3 * (JOINT_INDEX[hip] - 1)] += wobble  # flexion axis: feet swing fore/aft
    return history[-1], clean, noisy


def test_planted_feet_stay_where_they_stood() -> None:
    prev, clean, noisy = _sit_with_skating_feet()
    ankles = [JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"]]
    before, _ = forward_kinematics(noisy)
    start, _ = forward_kinematics(prev)
    drift = np.abs(before[:, ankles] - start[ankles]).max()
    assert drift > 0.02  # the wobble really moves the feet
    locked = lock_planted_feet(noisy, prev, 0.0, None)
    after, rot_after = forward_kinematics(locked)
    np.testing.assert_allclose(
        after[:, ankles], np.broadcast_to(start[ankles], after[:, ankles].shape), atol=2e-4
    )
    # the root and every joint but the legs are untouched
    untouched = np.setdiff1d(np.arange(75), _LEG_COLUMNS)
    np.testing.assert_array_equal(locked[:, untouched], noisy[:, untouched])
    # the feet keep the orientation the chunk gave them
    _, rot_before = forward_kinematics(noisy)
    np.testing.assert_allclose(rot_after[:, ankles], rot_before[:, ankles], atol=1e-6)
    # a chunk whose feet already stand (nearly) still changes by well under a degree
    np.testing.assert_allclose(lock_planted_feet(clean, prev, 0.0, None), clean, atol=0.01)


def test_lifted_feet_are_not_pinned() -> None:
    gen = ProceduralMotionGenerator()
    history = gen.reset(np.zeros(3), 0.0, seed=0)
    walk = gen.generate("Walk<forward><fast>")
    mask = planted_mask(np.concatenate([history[-1:], walk]), 0.0)
    assert mask[0].all() and not mask.all()  # standing at first, then a swing foot
    locked = lock_planted_feet(walk, history[-1], 0.0)
    pos_l, _ = forward_kinematics(locked)
    pos_w, _ = forward_kinematics(walk)
    # the walk still travels: the pelvis and the swing foot's reach are kept
    assert np.allclose(locked[:, :6], walk[:, :6])
    swing = ~mask[1:]
    for side, ankle in enumerate((JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"])):
        far = swing[:, side]
        if far.any():
            assert np.abs(pos_l[far, ankle] - pos_w[far, ankle]).max() < 0.05


def test_bad_input_is_refused() -> None:
    prev, _, noisy = _sit_with_skating_feet()
    with pytest.raises(ValueError, match="shape"):
        lock_planted_feet(noisy[:, :70], prev, 0.0)
    with pytest.raises(ValueError, match="previous_frame"):
        lock_planted_feet(noisy, prev[:10], 0.0)
    bad = noisy.copy()
    bad[3, 10] = np.nan
    with pytest.raises(ValueError, match="finite"):
        lock_planted_feet(bad, prev, 0.0)


def _thigh_clearance(frame: np.ndarray, seat: float) -> float:
    """Lowest thigh underside at the seat edge minus the seated pelvis's lowest point."""
    from humanclaw_gym.body.skeleton import heading_yaw
    from humanclaw_gym.motion import _legs
    from humanclaw_gym.motion.procedural import SEAT_EDGE_AHEAD_M, SEAT_SINK_M

    pos, _ = forward_kinematics(frame)
    yaw = float(heading_yaw(frame[3:6]))
    bottoms = [
        _legs.thigh_bottom_y(pos[JOINT_INDEX[f"{s}_hip"]], pos[JOINT_INDEX[f"{s}_knee"]],
                             pos[0], yaw, SEAT_EDGE_AHEAD_M)
        for s in ("left", "right")
    ]  # fmt: skip
    return min(bottoms) - (seat - SEAT_SINK_M)


def test_heels_rise_on_a_seat_above_knee_height(monkeypatch) -> None:
    from humanclaw_gym.motion.footlock import raise_heels_for_seat
    from humanclaw_gym.motion.procedural import THIGH_SEAT_CLEARANCE_M

    seat = 0.53
    # the procedural Sit down without its own heel raise (what a learned chunk looks like)
    monkeypatch.setattr(ProceduralMotionGenerator, "_seated_heel_raise", lambda *a: 0.0)
    gen = ProceduralMotionGenerator()
    gen.reset(np.array([1.0, 0.0, 2.0]), 0.7, seed=0)
    flat = gen.generate(f"Sit down<{seat}>")
    assert _thigh_clearance(flat[-1], seat) < 0.0  # the thighs sink deeper than the pelvis
    raised = raise_heels_for_seat(flat, 0.0, seat)
    assert _thigh_clearance(raised[-1], seat) == pytest.approx(THIGH_SEAT_CLEARANCE_M, abs=2e-3)
    # only legs and toes change; the toe joints (the pivots) and toe boxes stay put
    others = np.setdiff1d(np.arange(75), _LEG_COLUMNS)
    toes = [JOINT_INDEX["left_foot"], JOINT_INDEX["right_foot"]]
    others = np.setdiff1d(others, [6 + 3 * (j - 1) + k for j in toes for k in range(3)])
    np.testing.assert_allclose(raised[:, others], flat[:, others], atol=1e-12)
    p0, r0 = forward_kinematics(flat)
    p1, r1 = forward_kinematics(raised)
    np.testing.assert_allclose(p1[:, toes], p0[:, toes], atol=1e-6)
    np.testing.assert_allclose(r1[:, toes], r0[:, toes], atol=1e-6)
    # the heels: up at the end, growing in smoothly from (almost) nothing
    heels = [JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"]]
    rise = p1[:, heels, 1] - p0[:, heels, 1]
    assert rise[0].max() < 0.002 and rise[-1].min() > 0.02
    assert np.all(np.diff(rise, axis=0) > -1e-6)
    # a seat at knee height needs nothing
    gen.reset(np.zeros(3), 0.0, seed=0)
    low = gen.generate("Sit down<0.42>")
    np.testing.assert_array_equal(raise_heels_for_seat(low, 0.0, 0.42), low)
    with pytest.raises(ValueError, match="frames"):
        raise_heels_for_seat(low[:, :70], 0.0, 0.42)
