"""Tests of the procedural motion generator and the canonicalisation helpers
(humanclaw_gym/motion/)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from humanclaw_gym.backends.protocols import MotionGenerator
from humanclaw_gym.body.skeleton import (
    FRAME_DIM,
    JOINT_INDEX,
    STANDING_PELVIS_HEIGHT_M,
    forward_kinematics,
    heading_yaw,
    link_shapes,
)
from humanclaw_gym.motion import (
    SEATED_PELVIS_ABOVE_SURFACE_M,
    SEATED_PELVIS_TILT_RAD,
    SIT_BACK_DISTANCE_M,
    STATE_DIM,
    CanonicalFrame,
    ProceduralMotionGenerator,
    canonical_frame,
    canonicalize,
    canonicalize_points,
    decanonicalize,
    decanonicalize_points,
    joint_positions_velocities,
    seated_pelvis_height,
    sole_heights,
    state_to_frames,
)
from humanclaw_gym.motion.procedural import SEAT_SINK_M
from humanclaw_gym.motion.rotations import (
    matrix_from_rotvec,
    relative_angle,
    rot_y,
    rotvec_from_matrix,
    wrap_angle,
)
from humanclaw_gym.scenes.spec import STAIR_RISE_M, STAIR_RUN_M
from humanclaw_gym.skills import Skill, SkillCall

START = np.array([1.5, 0.2, -2.0])  # pelvis x/z, floor y (a raised floor on purpose)
YAW = 0.7
FLOOR = START[1]
TOL = 0.10  # relative tolerance on requested displacements / angles

MAX_ROOT_STEP_M = 0.11  # 3.3 m/s: a low sit drops ~0.65 m and moves back 0.32 m in 0.5 s
MAX_JOINT_STEP_DEG = 35.0  # per frame, any joint (the physics drive cap is 30)


def _gen(seed: int = 0) -> ProceduralMotionGenerator:
    gen = ProceduralMotionGenerator()
    gen.reset(START, YAW, seed=seed)
    return gen


def _heading(frame: np.ndarray) -> float:
    return float(heading_yaw(frame[3:6]))


def _forward(yaw: float) -> np.ndarray:
    return np.array([math.sin(yaw), 0.0, math.cos(yaw)])


def _left(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw), 0.0, -math.sin(yaw)])


def _run(gen: ProceduralMotionGenerator, *texts: str) -> np.ndarray:
    """History + every generated chunk, concatenated."""
    out = [gen.history()]
    for text in texts:
        out.append(gen.generate(SkillCall.parse(text)))
    return np.concatenate(out)


def _hip_flexion_deg(frame: np.ndarray) -> np.ndarray:
    pos, rot = forward_kinematics(frame)
    flex = []
    for hip, knee in (("left_hip", "left_knee"), ("right_hip", "right_knee")):
        thigh = rot[0].T @ (pos[JOINT_INDEX[knee]] - pos[JOINT_INDEX[hip]])
        flex.append(math.degrees(math.atan2(thigh[2], -thigh[1])))
    return np.array(flex)


def _pelvis_pitch_deg(frame: np.ndarray) -> float:
    fwd = matrix_from_rotvec(frame[3:6])[:, 2]
    return math.degrees(math.asin(-fwd[1]))


def _check_smooth(frames: np.ndarray) -> None:
    assert np.all(np.isfinite(frames))
    step = np.linalg.norm(np.diff(frames[:, :3], axis=0), axis=1)
    assert step.max() <= MAX_ROOT_STEP_M, step.max()
    rots = matrix_from_rotvec(frames[:, 3:].reshape(len(frames), 24, 3))
    dang = np.degrees(relative_angle(rots[1:], rots[:-1]))
    assert dang.max() <= MAX_JOINT_STEP_DEG, (
        dang.max(),
        np.unravel_index(dang.argmax(), dang.shape),
    )


# --------------------------------------------------------------------------------------
# Protocol, shapes, reset
# --------------------------------------------------------------------------------------
def test_capabilities_and_protocol() -> None:
    gen = ProceduralMotionGenerator()
    assert isinstance(gen, MotionGenerator)
    caps = gen.capabilities
    assert caps.name == "procedural"
    assert caps.skills == frozenset(int(s) for s in Skill)  # a planner for every skill
    assert caps.batched is False


@pytest.mark.parametrize(
    "kwargs",
    [{"fps": 0}, {"fps": float("nan")}, {"frames_per_chunk": 2}, {"history_frames": 1}],
)
def test_constructor_rejects_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        ProceduralMotionGenerator(**kwargs)


def test_reset_returns_standing_seed() -> None:
    gen = ProceduralMotionGenerator()
    hist = gen.reset(START, YAW, seed=3)
    assert hist.shape == (5, FRAME_DIM) and hist.dtype == np.float64
    assert np.array_equal(hist, np.repeat(hist[:1], 5, axis=0))
    frame = hist[0]
    assert frame[0] == pytest.approx(START[0]) and frame[2] == pytest.approx(START[2])
    assert frame[1] == pytest.approx(FLOOR + STANDING_PELVIS_HEIGHT_M)
    assert _heading(frame) == pytest.approx(YAW)
    # both soles exactly on the floor, upright pelvis
    np.testing.assert_allclose(sole_heights(frame), FLOOR, atol=1e-3)
    assert abs(_pelvis_pitch_deg(frame)) < 1e-6
    # natural standing pose: arms hang along the body (not the T-pose), elbows slightly bent
    pos, _ = forward_kinematics(frame)
    for side in ("left", "right"):
        shoulder = pos[JOINT_INDEX[f"{side}_shoulder"]]
        elbow = pos[JOINT_INDEX[f"{side}_elbow"]]
        hand = pos[JOINT_INDEX[f"{side}_hand"]]
        assert shoulder[1] - hand[1] > 0.45
        lateral = abs((hand - frame[:3]) @ _left(YAW))
        assert lateral < 0.36
        upper, fore = elbow - shoulder, hand - elbow
        bend = math.degrees(math.acos(upper @ fore / np.linalg.norm(upper) / np.linalg.norm(fore)))
        assert 3.0 < bend < 30.0
    assert np.array_equal(gen.history(), hist)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((np.array([0.0, 0.0]), 0.0), "start_position"),
        ((np.array([0.0, np.nan, 0.0]), 0.0), "start_position"),
        ((np.zeros(3), float("inf")), "start_yaw_rad"),
        ((np.zeros(3), 0.0, -1), "seed"),
    ],
)
def test_reset_rejects_bad_arguments(args: tuple, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ProceduralMotionGenerator().reset(*args)


def test_generate_before_reset_and_stop() -> None:
    gen = ProceduralMotionGenerator()
    with pytest.raises(RuntimeError):
        gen.generate(SkillCall.walk())
    with pytest.raises(RuntimeError):
        gen.history()
    gen.reset(START, YAW)
    before = gen.history()
    with pytest.raises(ValueError, match="Stop"):
        gen.generate(SkillCall.stop())
    assert np.array_equal(gen.history(), before)  # a rejected call changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "Walk<forward><normal>",
        "Turn<right><30>",
        "Climb upstairs<normal>",
        "Sit down<0.45>",
        "Step back<0.25>",
        "Side step<left><0.25>",
        "Walk downstairs<normal>",
    ],
)
def test_every_motion_skill_shape_dtype_and_axis_angles(text: str) -> None:
    gen = _gen()
    chunk = gen.generate(SkillCall.parse(text))
    assert chunk.shape == (15, FRAME_DIM) and chunk.dtype == np.float64
    assert np.all(np.isfinite(chunk))
    norms = np.linalg.norm(chunk[:, 3:].reshape(15, 24, 3), axis=-1)
    assert norms.max() <= math.pi + 1e-9
    # the history rolls: it is the last 5 generated frames, returned as a copy
    hist = gen.history()
    assert np.array_equal(hist, chunk[-5:])
    hist[:] = 0.0
    assert np.array_equal(gen.history(), chunk[-5:])


def test_generate_accepts_text_form() -> None:
    a, b = _gen(), _gen()
    np.testing.assert_array_equal(
        a.generate("Turn<left><30>"), b.generate(SkillCall.turn("left", 30))
    )


# --------------------------------------------------------------------------------------
# Requested vs realised (kinematic, generated root)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("speed", "distance"), [("slow", 0.2), ("normal", 0.4), ("fast", 0.6)])
@pytest.mark.parametrize("warm", [False, True])
def test_walk_distance(speed: str, distance: float, warm: bool) -> None:
    gen = _gen()
    if warm:
        gen.generate(SkillCall.walk(speed))
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.walk(speed))
    yaw = _heading(start)
    move = chunk[-1, :3] - start[:3]
    assert move @ _forward(yaw) == pytest.approx(distance, rel=TOL)
    assert abs(move @ _left(yaw)) < 0.01 * distance + 1e-3
    assert abs(wrap_angle(_heading(chunk[-1]) - yaw)) < math.radians(1.0)


@pytest.mark.parametrize("direction", ["left", "right"])
@pytest.mark.parametrize("angle_deg", [10.0, 45.0, 120.0])
def test_turn_angle(direction: str, angle_deg: float) -> None:
    gen = _gen()
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.turn(direction, angle_deg))
    sign = 1.0 if direction == "left" else -1.0
    turned = float(wrap_angle(_heading(chunk[-1]) - _heading(start)))
    assert turned == pytest.approx(sign * math.radians(angle_deg), rel=TOL)
    # turning in place: the root stays put
    assert np.linalg.norm((chunk[:, :3] - start[:3])[:, [0, 2]], axis=1).max() < 0.01
    # ease-in-out: slow at both ends, fastest in the middle
    yaw = np.unwrap([_heading(f) for f in np.concatenate([start[None], chunk])])
    rate = np.abs(np.diff(yaw))
    assert rate[0] < 0.3 * rate.max() and rate[-1] < 0.3 * rate.max()
    assert 4 <= int(np.argmax(rate)) <= 10
    # the feet end squared up with the new heading
    _, rot = forward_kinematics(chunk[-1])
    for ankle in ("left_ankle", "right_ankle"):
        foot_yaw = math.atan2(rot[JOINT_INDEX[ankle]][0, 2], rot[JOINT_INDEX[ankle]][2, 2])
        assert abs(wrap_angle(foot_yaw - _heading(chunk[-1]))) < math.radians(2.0)


@pytest.mark.parametrize("direction", ["left", "right"])
@pytest.mark.parametrize("distance", [0.1, 0.5])
def test_side_step(direction: str, distance: float) -> None:
    gen = _gen()
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.side_step(direction, distance))
    yaw = _heading(start)
    move = chunk[-1, :3] - start[:3]
    sign = 1.0 if direction == "left" else -1.0
    assert move @ _left(yaw) == pytest.approx(sign * distance, rel=TOL)
    assert abs(move @ _forward(yaw)) < 0.01
    assert np.abs(wrap_angle([_heading(f) - yaw for f in chunk])).max() < math.radians(1.0)


@pytest.mark.parametrize("distance", [0.1, 0.6])
def test_step_back(distance: float) -> None:
    gen = _gen()
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.step_back(distance))
    yaw = _heading(start)
    move = chunk[-1, :3] - start[:3]
    assert move @ _forward(yaw) == pytest.approx(-distance, rel=TOL)
    assert abs(move @ _left(yaw)) < 0.01
    assert np.abs(wrap_angle([_heading(f) - yaw for f in chunk])).max() < math.radians(1.0)


def test_climb_up_and_down_one_step() -> None:
    gen = _gen()
    yaw = YAW
    start = gen.history()[-1]
    up = gen.generate(SkillCall.climb_up())
    move = up[-1, :3] - start[:3]
    assert move[1] == pytest.approx(STAIR_RISE_M, rel=TOL)
    assert move @ _forward(yaw) == pytest.approx(STAIR_RUN_M, rel=TOL)
    np.testing.assert_allclose(sole_heights(up[-1]), FLOOR + STAIR_RISE_M, atol=0.005)
    assert gen.ground_y == pytest.approx(FLOOR + STAIR_RISE_M)
    # feet never dip below the lower floor, and end fully on the new tread
    assert sole_heights(up).min() >= FLOOR - 0.01
    up2 = gen.generate(SkillCall.climb_up())
    np.testing.assert_allclose(sole_heights(up2[-1]), FLOOR + 2 * STAIR_RISE_M, atol=0.005)
    start = up2[-1]
    down = gen.generate(SkillCall.climb_down())
    move = down[-1, :3] - start[:3]
    assert move[1] == pytest.approx(-STAIR_RISE_M, rel=TOL)
    assert move @ _forward(yaw) == pytest.approx(STAIR_RUN_M, rel=TOL)
    np.testing.assert_allclose(sole_heights(down[-1]), FLOOR + STAIR_RISE_M, atol=0.005)
    assert gen.ground_y == pytest.approx(FLOOR + STAIR_RISE_M)


def _pelvis_capsule_bottom(frame: np.ndarray) -> float:
    shape = link_shapes()[0]
    rot = matrix_from_rotvec(frame[3:6])
    centre = frame[:3] + rot @ np.asarray(shape.offset_m)
    axis = rot @ matrix_from_rotvec(_quat_to_rotvec(shape.quat_xyzw)) @ [0.0, 0.0, 1.0]
    return float(centre[1] - abs(axis[1]) * shape.half_length - shape.radius)


def _quat_to_rotvec(q: tuple[float, float, float, float]) -> np.ndarray:
    x, y, z, w = q
    angle = 2.0 * math.atan2(math.sqrt(x * x + y * y + z * z), w)
    norm = math.sqrt(x * x + y * y + z * z)
    return np.zeros(3) if norm < 1e-12 else np.array([x, y, z]) / norm * angle


def _torso_pitch_deg(frame: np.ndarray) -> float:
    _, rot = forward_kinematics(frame)
    up = rot[JOINT_INDEX["spine3"]][:, 1]
    return math.degrees(math.asin(float(up @ _forward(_heading(frame)))))


@pytest.mark.parametrize("height", [0.15, 0.45, 0.85])
def test_sit_down_geometry(height: float) -> None:
    gen = _gen()
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.sit(height))
    end = chunk[-1]
    # documented seated height: the pelvis capsule's lowest point is asked 1 cm into the seat
    assert end[1] == pytest.approx(seated_pelvis_height(height, FLOOR), abs=0.005)
    assert end[1] - FLOOR - height == pytest.approx(SEATED_PELVIS_ABOVE_SURFACE_M)
    assert SEAT_SINK_M == 0.01
    assert _pelvis_capsule_bottom(end) == pytest.approx(FLOOR + height - SEAT_SINK_M, abs=0.003)
    # the root moves backwards (the seat is behind the body), the heading is kept
    move = end[:3] - start[:3]
    assert -0.4 <= move @ _forward(YAW) <= -0.25
    assert move @ _forward(YAW) == pytest.approx(-SIT_BACK_DISTANCE_M, abs=0.005)
    assert abs(wrap_angle(_heading(end) - YAW)) < math.radians(1.0)
    # hips flexed like a seated person (about 80 degrees on a 0.45 m seat)
    flex = _hip_flexion_deg(end)
    assert flex.min() > 75.0
    # the torso leans forward on the way down and ends nearly upright on a slightly tilted
    # pelvis (a relaxed 8 degree slouch that lets the hands rest on the thighs)
    assert max(_torso_pitch_deg(f) for f in chunk) > 10.0
    assert _torso_pitch_deg(end) == pytest.approx(8.0, abs=1.0)
    assert _pelvis_pitch_deg(end) == pytest.approx(math.degrees(SEATED_PELVIS_TILT_RAD), abs=0.5)
    soles = sole_heights(chunk)
    assert soles.min() >= FLOOR - 0.01
    if height <= 0.6:  # feet stay on the floor
        np.testing.assert_allclose(soles[-1], FLOOR, atol=0.01)
    else:  # too high for the feet: they hang
        assert soles[-1].min() > FLOOR + 0.05
    # hands rest (on the thighs), not held out: wrists at least 30 cm below the shoulders
    for f in (end, gen.generate(SkillCall.walk("normal"))[0]):
        pos, _ = forward_kinematics(f)
        for side in ("left", "right"):
            drop = pos[JOINT_INDEX[f"{side}_shoulder"], 1] - pos[JOINT_INDEX[f"{side}_wrist"], 1]
            assert drop >= 0.30


@pytest.mark.parametrize("height", [0.42, 0.45, 0.5, 0.53, 0.56, 0.585, 0.6, 0.68])
def test_seated_thighs_clear_the_seat_edge_with_flat_feet(height: float) -> None:
    """Above knee height the body sits back less (down to ``SIT_BACK_MIN_M``) so that its
    thighs, where they cross the seat's front edge, stay shallower in the seat than the
    pelvis with both feet flat on the floor; only beyond that do the feet roll onto their
    toes (0.6 m: by less than 1 cm at the heel), and on seats whose height the legs cannot
    reach comfortably (0.68 m) they hang. The hands rest on the thighs."""
    from humanclaw_gym.motion import _legs
    from humanclaw_gym.motion.procedural import (
        SIT_BACK_MIN_M,
        SIT_START_TO_EDGE_M,
        THIGH_SEAT_CLEARANCE_M,
    )

    gen = _gen()
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.sit(height))
    end = chunk[-1]
    back = -float((end[:3] - start[:3]) @ _forward(YAW))
    assert SIT_BACK_MIN_M - 1e-9 <= back <= SIT_BACK_DISTANCE_M + 1e-9
    pos, _ = forward_kinematics(end)
    soles = sole_heights(chunk)
    if height >= 0.68:  # too high for the feet: they hang, the body sits back fully
        assert soles[-1].min() > FLOOR + 0.05 and back == pytest.approx(SIT_BACK_DISTANCE_M)
        return
    bottoms = [
        _legs.thigh_bottom_y(pos[JOINT_INDEX[f"{s}_hip"]], pos[JOINT_INDEX[f"{s}_knee"]],
                             pos[0], _heading(end), back - SIT_START_TO_EDGE_M)
        for s in ("left", "right")
    ]  # fmt: skip
    pelvis_bottom = FLOOR + height - SEAT_SINK_M
    assert min(bottoms) >= pelvis_bottom + THIGH_SEAT_CLEARANCE_M - 0.002
    start_pos, _ = forward_kinematics(chunk[0])
    heels = [JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"]]
    heel_rise = pos[heels, 1] - start_pos[heels, 1]
    np.testing.assert_allclose(soles[-1], FLOOR, atol=0.005)  # on the floor
    if height <= 0.45:  # at or below knee height: the full sit-back distance
        assert back == pytest.approx(SIT_BACK_DISTANCE_M)
    if height >= 0.5:  # nearer the edge, the higher the seat
        assert back < SIT_BACK_DISTANCE_M - 0.05
    assert np.all(np.abs(heel_rise) < (0.005 if height <= 0.585 else 0.01))  # flat feet
    for side in ("left", "right"):
        hip, knee = pos[JOINT_INDEX[f"{side}_hip"]], pos[JOINT_INDEX[f"{side}_knee"]]
        wrist = pos[JOINT_INDEX[f"{side}_wrist"]]
        u = np.clip((wrist - hip) @ (knee - hip) / ((knee - hip) @ (knee - hip)), 0.0, 1.0)
        gap = np.linalg.norm(wrist - (hip + u * (knee - hip))) - _legs.THIGH_RADIUS_M
        assert 0.02 < gap < 0.07  # the wrist rests just above the thigh
        assert pos[JOINT_INDEX[f"{side}_shoulder"], 1] - wrist[1] >= 0.30


def test_sit_while_seated_holds_and_any_other_skill_stands_up() -> None:
    gen = _gen()
    seated = gen.generate(SkillCall.sit(0.45))
    hold = gen.generate(SkillCall.sit(0.6))
    np.testing.assert_array_equal(hold, np.repeat(seated[-1:], 15, axis=0))
    stand = gen.generate(SkillCall.walk("fast"))
    # the whole chunk stands up: standing height, back over the feet, heading kept
    assert stand[-1, 1] == pytest.approx(FLOOR + STANDING_PELVIS_HEIGHT_M, abs=0.01)
    move = stand[-1, :3] - seated[-1, :3]
    assert move @ _forward(YAW) == pytest.approx(SIT_BACK_DISTANCE_M, abs=0.01)
    np.testing.assert_allclose(sole_heights(stand[-1]), FLOOR, atol=0.005)
    assert np.all(np.diff(stand[:, 1]) > -1e-3)  # rising, never dipping
    # and the next call walks again
    walk = gen.generate(SkillCall.walk("normal"))
    assert (walk[-1, :3] - stand[-1, :3]) @ _forward(YAW) == pytest.approx(0.4, rel=TOL)


def test_stand_up_from_a_high_seat_puts_the_feet_down() -> None:
    gen = _gen()
    gen.generate(SkillCall.sit(0.85))
    stand = gen.generate(SkillCall.turn("left", 30))
    assert stand[-1, 1] == pytest.approx(FLOOR + STANDING_PELVIS_HEIGHT_M, abs=0.01)
    np.testing.assert_allclose(sole_heights(stand[-1]), FLOOR, atol=0.005)


# --------------------------------------------------------------------------------------
# Smoothness, feet, determinism
# --------------------------------------------------------------------------------------
SEQUENCES = [
    ("Walk<forward><normal>", "Turn<left><90>", "Walk<forward><fast>", "Sit down<0.45>",
     "Walk<forward><slow>"),
    ("Walk<forward><fast>", "Walk<forward><slow>", "Walk<forward><fast>", "Turn<right><120>",
     "Side step<left><0.5>", "Step back<0.6>", "Walk<forward><normal>"),
    ("Climb upstairs<normal>", "Climb upstairs<normal>", "Walk<forward><normal>",
     "Turn<left><120>", "Turn<left><60>", "Walk downstairs<normal>", "Walk downstairs<normal>"),
    ("Sit down<0.15>", "Side step<right><0.3>", "Sit down<0.85>", "Step back<0.1>",
     "Turn<right><10>", "Sit down<0.6>"),
]  # fmt: skip


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_continuity_across_chunk_boundaries(sequence: tuple[str, ...]) -> None:
    frames = _run(_gen(), *sequence)
    _check_smooth(frames)
    # velocity is continuous at every chunk boundary: the root velocity of the first new
    # frame is close to that of the last frame before it
    vel = np.diff(frames[:, :3], axis=0) * 30.0
    for k in range(len(sequence)):
        b = 4 + 15 * k  # index of the last frame before chunk k
        jump = np.linalg.norm(vel[b] - vel[b - 1])
        assert jump < 0.5, (k, sequence[k], jump)


def test_walk_feet_stay_on_or_above_the_floor() -> None:
    frames = _run(
        _gen(),
        *(["Walk<forward><slow>"] + ["Walk<forward><fast>"] * 4 + ["Walk<forward><normal>"] * 2),
    )
    soles = sole_heights(frames)
    assert soles.min() >= FLOOR - 0.01
    # a walk, not a run: at least one foot is on the ground in every frame
    assert np.all(soles.min(axis=1) <= FLOOR + 0.01)
    # the left and the right foot both take steps
    assert (soles[:, 0] > FLOOR + 0.03).any() and (soles[:, 1] > FLOOR + 0.03).any()
    _check_smooth(frames)


def test_walk_swings_legs_and_arms_in_opposition() -> None:
    frames = _run(_gen(), *["Walk<forward><normal>"] * 4)[20:]
    pos, _ = forward_kinematics(frames)
    pelvis = frames[:, :3]
    fwd = _forward(YAW)
    foot = (pos[:, [JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"]]] - pelvis[:, None]) @ fwd
    hand = (pos[:, [JOINT_INDEX["left_wrist"], JOINT_INDEX["right_wrist"]]] - pelvis[:, None]) @ fwd
    foot_lead = foot[:, 0] - foot[:, 1]
    hand_lead = hand[:, 0] - hand[:, 1]
    assert np.corrcoef(foot_lead, hand_lead)[0, 1] < -0.8
    assert np.ptp(foot_lead) > 0.4
    # knees flex during swing
    rots = matrix_from_rotvec(frames[:, 3:].reshape(len(frames), 24, 3))
    knee_deg = np.degrees(relative_angle(rots[:, JOINT_INDEX["left_knee"]], np.eye(3)))
    assert knee_deg.max() > 30.0


def test_determinism_and_seed() -> None:
    calls = ("Walk<forward><normal>", "Turn<left><45>", "Sit down<0.5>", "Side step<right><0.2>")
    a = _run(_gen(seed=7), *calls)
    b = _run(_gen(seed=7), *calls)
    np.testing.assert_array_equal(a, b)
    c = _run(_gen(seed=8), *calls)
    assert not np.array_equal(a, c)  # style differs...
    np.testing.assert_allclose(c[:, :3], a[:, :3], atol=1e-9)  # ...the root path does not


def test_turn_after_fast_walk_keeps_momentum_small() -> None:
    gen = _gen()
    gen.generate(SkillCall.walk("fast"))
    gen.generate(SkillCall.walk("fast"))
    start = gen.history()[-1]
    chunk = gen.generate(SkillCall.turn("right", 90))
    drift = np.linalg.norm((chunk[-1] - start)[[0, 2]])
    assert drift <= 0.16  # documented: incoming speed x 0.125 s
    turned = float(wrap_angle(_heading(chunk[-1]) - _heading(start)))
    assert turned == pytest.approx(-math.pi / 2, rel=TOL)


def test_long_random_episode_is_well_formed() -> None:
    rng = np.random.default_rng(0)
    gen = _gen(seed=1)
    texts = []
    for _ in range(40):
        k = int(rng.integers(0, 7))
        texts.append(
            [
                f"Walk<forward><{rng.choice(['slow', 'normal', 'fast'])}>",
                f"Turn<{rng.choice(['left', 'right'])}><{rng.uniform(10, 120):.1f}>",
                f"Side step<{rng.choice(['left', 'right'])}><{rng.uniform(0.1, 0.5):.2f}>",
                f"Step back<{rng.uniform(0.1, 0.6):.2f}>",
                f"Sit down<{rng.uniform(0.15, 0.85):.2f}>",
                "Climb upstairs<normal>",
                "Walk downstairs<normal>",
            ][k]
        )
    frames = _run(gen, *texts)
    assert frames.shape == (5 + 15 * len(texts), FRAME_DIM)
    _check_smooth(frames)
    assert np.linalg.norm(frames[:, 3:].reshape(-1, 24, 3), axis=-1).max() <= math.pi + 1e-9


# --------------------------------------------------------------------------------------
# Canonicalisation and the 219-D state
# --------------------------------------------------------------------------------------
def test_canonicalize_round_trip_and_reference() -> None:
    frames = _run(_gen(), "Walk<forward><fast>", "Turn<left><60>")
    ref = canonical_frame(frames[-1])
    assert ref.origin_m[1] == pytest.approx(FLOOR, abs=1e-3)  # floor from the feet
    canon = canonicalize(frames, ref)
    last = canon[-1]
    assert last[0] == pytest.approx(0.0, abs=1e-12) and last[2] == pytest.approx(0.0, abs=1e-12)
    assert last[1] == pytest.approx(frames[-1, 1] - FLOOR, abs=1e-3)
    assert _heading(last) == pytest.approx(0.0, abs=1e-9)
    back = decanonicalize(canon, ref)
    np.testing.assert_allclose(back[:, :3], frames[:, :3], atol=1e-12)
    r_back = matrix_from_rotvec(back[:, 3:6])
    r_orig = matrix_from_rotvec(frames[:, 3:6])
    assert relative_angle(r_back, r_orig).max() < 1e-9
    np.testing.assert_array_equal(back[:, 6:], frames[:, 6:])
    # ref=None uses the last frame; a raw frame works as ref too
    np.testing.assert_allclose(canonicalize(frames), canon, atol=1e-12)
    np.testing.assert_allclose(canonicalize(frames, frames[-1]), canon, atol=1e-12)
    # joint positions transform like points
    pos_w, _ = forward_kinematics(frames)
    pos_c, _ = forward_kinematics(canon)
    np.testing.assert_allclose(canonicalize_points(pos_w, ref), pos_c, atol=1e-9)
    np.testing.assert_allclose(decanonicalize_points(pos_c, ref), pos_w, atol=1e-9)


def test_canonical_frame_validation() -> None:
    with pytest.raises(ValueError, match="origin_m"):
        CanonicalFrame((0.0, float("nan"), 0.0), 0.0)
    with pytest.raises(ValueError, match="ref_frame"):
        canonical_frame(np.zeros(74))
    with pytest.raises(ValueError, match="floor_y"):
        canonical_frame(_gen().history()[-1], floor_y=float("inf"))
    with pytest.raises(TypeError):
        decanonicalize(np.zeros((2, 75)), np.zeros(75))  # type: ignore[arg-type]


def test_joint_positions_velocities_state() -> None:
    frames = _run(_gen(), "Walk<forward><normal>")
    state = joint_positions_velocities(frames[4:], fps=30.0, previous_frame=frames[3])
    assert state.shape == (16, STATE_DIM) and STATE_DIM == 219
    np.testing.assert_array_equal(state[:, :75], frames[4:])
    pos, _ = forward_kinematics(frames[3:])
    np.testing.assert_allclose(state[:, 75:147], pos[1:].reshape(16, 72))
    np.testing.assert_allclose(state[:, 147:], np.diff(pos, axis=0).reshape(16, 72) * 30.0)
    no_prev = joint_positions_velocities(frames[4:])
    np.testing.assert_allclose(no_prev[0, 147:], no_prev[1, 147:])
    np.testing.assert_array_equal(state_to_frames(state), frames[4:])
    with pytest.raises(ValueError):
        state_to_frames(np.zeros((2, 75)))


def test_rotation_helpers() -> None:
    rng = np.random.default_rng(0)
    rv = rng.normal(size=(200, 3))
    rv *= (rng.uniform(0.0, math.pi, size=200) / np.linalg.norm(rv, axis=1))[:, None]
    rv[0] = [0.0, math.pi, 0.0]
    rv[1] = 0.0
    rv[2] = [1e-10, 0.0, 0.0]
    m = matrix_from_rotvec(rv)
    np.testing.assert_allclose(
        m @ np.swapaxes(m, 1, 2), np.broadcast_to(np.eye(3), m.shape), atol=1e-12
    )
    back = rotvec_from_matrix(m)
    assert np.linalg.norm(back, axis=1).max() <= math.pi + 1e-12
    assert relative_angle(matrix_from_rotvec(back), m).max() < 1e-7
    # rot_y faces (sin psi, 0, cos psi)
    np.testing.assert_allclose(rot_y(0.3) @ [0.0, 0.0, 1.0], [math.sin(0.3), 0.0, math.cos(0.3)])
    assert float(wrap_angle(3 * math.pi)) == pytest.approx(-math.pi)
