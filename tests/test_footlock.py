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
    from humanclaw_gym.motion.procedural import (
        SIT_BACK_DISTANCE_M,
        SIT_START_TO_EDGE_M,
        THIGH_SEAT_CLEARANCE_M,
        sit_back_distance,
    )

    seat = 0.53
    near = sit_back_distance(seat) - SIT_START_TO_EDGE_M  # where the edge is after our sit
    # the procedural Sit down sitting back fully with flat feet (what the learned network's
    # chunk looked like): the thighs cross the seat's edge too low
    monkeypatch.setattr(
        ProceduralMotionGenerator,
        "_sit_back",
        lambda *a: (SIT_BACK_DISTANCE_M, (0.0, 0.0), False),
    )
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
    # a seat at knee height needs nothing, nor one whose edge is near the hips
    gen.reset(np.zeros(3), 0.0, seed=0)
    low = gen.generate("Sit down<0.42>")
    np.testing.assert_array_equal(raise_heels_for_seat(low, 0.0, 0.42), low)
    assert near < 0.1
    np.testing.assert_array_equal(raise_heels_for_seat(flat, 0.0, seat, near), flat)
    with pytest.raises(ValueError, match="frames"):
        raise_heels_for_seat(low[:, :70], 0.0, 0.42)


def _shoulder_wrist_drops(frame: np.ndarray) -> list[float]:
    pos, _ = forward_kinematics(frame)
    return [
        float(pos[JOINT_INDEX[f"{s}_shoulder"], 1] - pos[JOINT_INDEX[f"{s}_wrist"], 1])
        for s in ("left", "right")
    ]


def _held_out_arms(chunk: np.ndarray) -> np.ndarray:
    """The chunk with both arms raised forward as the old seated pose had them (wrists
    about 28 cm below the shoulders)."""
    from humanclaw_gym.motion import _arms
    from humanclaw_gym.rotations import rotvec_from_matrix

    out = chunk.copy()
    for side, sign in ((0, 1.0), (1, -1.0)):
        rots = _arms.arm_rotations(-sign * np.radians(80.0), 0.9, 0.9, side)
        for joint, rot in zip((_arms.SHOULDER[side], _arms.ELBOW[side]), rots, strict=True):
            out[:, 3 + 3 * joint : 6 + 3 * joint] = rotvec_from_matrix(rot)
    return out


def test_hands_come_to_rest_on_the_thighs() -> None:
    """A seated chunk's held-out arms end resting on the thighs (wrists >= 30 cm below the
    shoulders, just above the thighs); only the shoulders and elbows change, growing in with
    the hips' flexion; a chunk that does not end seated is returned unchanged."""
    from humanclaw_gym.motion import _arms
    from humanclaw_gym.motion.footlock import hip_flexion_rad, rest_hands_on_thighs

    gen = ProceduralMotionGenerator()
    gen.reset(np.zeros(3), 0.4, seed=0)
    sit = _held_out_arms(gen.generate("Sit down<0.5>"))
    assert max(_shoulder_wrist_drops(sit[-1])) < 0.30  # held out
    rested = rest_hands_on_thighs(sit)
    assert min(_shoulder_wrist_drops(rested[-1])) >= 0.30
    pos, _ = forward_kinematics(rested[-1])
    for side in ("left", "right"):
        hip, knee = pos[JOINT_INDEX[f"{side}_hip"]], pos[JOINT_INDEX[f"{side}_knee"]]
        wrist = pos[JOINT_INDEX[f"{side}_wrist"]]
        u = np.clip((wrist - hip) @ (knee - hip) / ((knee - hip) @ (knee - hip)), 0.0, 1.0)
        assert 0.02 < np.linalg.norm(wrist - hip - u * (knee - hip)) - _arms.THIGH_RADIUS_M < 0.08
    arm_cols = [3 + 3 * j + k for j in (*_arms.SHOULDER, *_arms.ELBOW) for k in range(3)]
    others = np.setdiff1d(np.arange(75), arm_cols)
    np.testing.assert_array_equal(rested[:, others], sit[:, others])
    change = np.abs(rested - sit)[:, arm_cols].max(axis=1)
    flex = hip_flexion_rad(sit)
    assert change[flex < np.radians(10.0)].max(initial=0.0) < 1e-9  # standing: untouched
    assert np.all(np.diff(change[flex > np.radians(10.0)]) > -0.05)  # grows in
    walk = gen.generate("Walk<forward><normal>")  # stands up: not seated at its end
    np.testing.assert_array_equal(rest_hands_on_thighs(walk), walk)


def test_sit_back_scales_the_backward_travel() -> None:
    from humanclaw_gym.body.skeleton import heading_yaw
    from humanclaw_gym.motion.footlock import sit_back_to

    gen = ProceduralMotionGenerator()
    prev = gen.reset(np.array([1.0, 0.0, -2.0]), 0.9, seed=0)[-1]
    sit = gen.generate("Sit down<0.42>")  # moves back 0.32 m
    yaw = float(heading_yaw(prev[3:6]))
    fwd = np.array([np.sin(yaw), 0.0, np.cos(yaw)])
    side = np.array([np.cos(yaw), 0.0, -np.sin(yaw)])
    travel = (sit[:, :3] - prev[:3]) @ fwd
    assert travel[-1] == pytest.approx(-0.32, abs=1e-6)
    short = sit_back_to(sit, prev, 0.2)
    np.testing.assert_allclose((short[:, :3] - prev[:3]) @ fwd, travel * 0.2 / 0.32, atol=1e-12)
    np.testing.assert_allclose(short[:, :3] @ side, sit[:, :3] @ side, atol=1e-12)
    np.testing.assert_array_equal(short[:, [1, *range(3, 75)]], sit[:, [1, *range(3, 75)]])
    held = sit_back_to(sit, prev, 0.0)
    np.testing.assert_allclose((held[:, :3] - prev[:3]) @ fwd, 0.0, atol=1e-12)
    gen.reset(np.zeros(3), 0.0, seed=0)
    turn = gen.generate("Turn<left><30>")  # no backward travel: unchanged
    np.testing.assert_array_equal(sit_back_to(turn, gen.reset(np.zeros(3), 0.0)[-1], 0.2), turn)
    with pytest.raises(ValueError, match="back_m"):
        sit_back_to(sit, prev, -0.1)
    with pytest.raises(ValueError, match="previous_frame"):
        sit_back_to(sit, prev[:10], 0.2)


def test_a_sit_never_steps_feet_stay_flat_where_they_stood() -> None:
    """With ``never_steps`` a foot planted before the chunk stays put, flat as it stood,
    even where the chunk lifts it above the planted height (a guided pelvis lifts all)."""
    gen = ProceduralMotionGenerator()
    prev = gen.reset(np.zeros(3), 0.0, seed=0)[-1]
    sit = gen.generate("Sit down<0.45>")
    lifted = sit.copy()
    lifted[4:, 1] += np.linspace(0.0, 0.07, len(sit) - 4)  # rises 7 cm once the knees bend
    ankles = [JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"]]
    start, rot0 = forward_kinematics(prev)
    plain = forward_kinematics(lock_planted_feet(lifted, prev, 0.0, None))[0]
    assert plain[-1, ankles, 1].min() > start[ankles, 1].min() + 0.015  # let go: too high
    kept, rot = forward_kinematics(lock_planted_feet(lifted, prev, 0.0, None, never_steps=True))
    np.testing.assert_allclose(
        kept[:, ankles], np.broadcast_to(start[ankles], kept[:, ankles].shape), atol=2e-4
    )
    np.testing.assert_allclose(
        rot[:, ankles], np.broadcast_to(rot0[ankles], rot[:, ankles].shape), atol=1e-6
    )
