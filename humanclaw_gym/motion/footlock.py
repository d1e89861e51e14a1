"""Foot-contact cleanup: keep planted feet where they were planted (two-bone leg IK).

Learned motion lets a foot that should stand still drift by a few millimetres per frame
("foot skate"). In the half-physics only the joint angles (and the root's horizontal and
yaw velocities) drive the body, so a drifting heel is a real foot moving on the floor, and
next to furniture it can kick into it (the approach pose for Sit down leaves about 3 cm
between the heel and the seat's front face).

:func:`lock_planted_feet` finds, per foot, the frames where the foot is planted (its lowest
sole point within :data:`PLANTED_HEIGHT_M` of the support and its ankle moving slower than
:data:`PLANTED_SPEED_M_S` horizontally), pins the ankle of every planted run to where the
run started (the last history frame counts, so a foot that was planted stays exactly put),
eases the pinned offset out over :data:`RELEASE_FRAMES` frames after lift-off, and solves
each changed frame with an analytic two-bone IK: the knee bends about its own flexion axis
to set the hip-ankle distance, the hip swings the leg onto the target, and the ankle keeps
the foot's world orientation of the original frame. The root and every other joint are
untouched. Pure numpy; frames are ``(T, 75)`` world frames (Y up, metres, radians).

Three more steps bring a generated Sit down chunk to the procedural synthesizer's seated
pose (docs/motion.md, "Seat geometry"): :func:`sit_back_to` scales the pelvis's backward
travel to the distance the synthesizer sits back on that seat (less on a seat above knee
height, so that the thighs cross its front edge near the hips with the feet flat);
:func:`raise_heels_for_seat` rolls planted feet onto their toes where the thighs would
still land on the edge first; :func:`rest_hands_on_thighs` brings the hands onto the
thighs as the hips flex.
"""

from __future__ import annotations

import numpy as np

from humanclaw_gym.body.skeleton import (
    FRAME_DIM,
    JOINT_INDEX,
    PARENTS,
    REST_JOINTS_M,
    forward_kinematics,
    heading_yaw,
)
from humanclaw_gym.motion.bodyfit import MotionBody
from humanclaw_gym.motion.canonical import sole_heights
from humanclaw_gym.rotations import (
    matrix_from_rotvec,
    rot_x,
    rot_y,
    rotvec_from_matrix,
    yaw_of_matrix,
)

__all__ = [
    "PLANTED_HEIGHT_M",
    "PLANTED_SPEED_M_S",
    "RELEASE_FRAMES",
    "SEATED_HIP_FLEX_RAD",
    "hip_flexion_rad",
    "lock_planted_feet",
    "planted_mask",
    "raise_heels",
    "raise_heels_for_seat",
    "rest_hands_on_thighs",
    "sit_back_to",
    "tip_pelvis",
]

#: A foot counts as planted when its lowest sole point is at most this far above the support.
PLANTED_HEIGHT_M = 0.05
#: ... and its ankle moves slower than this horizontally (m/s at 30 fps).
PLANTED_SPEED_M_S = 0.5
#: Frames over which the pinned offset is released after the foot lifts off.
RELEASE_FRAMES = 3
_FPS = 30.0
_LEGS = (
    (JOINT_INDEX["left_hip"], JOINT_INDEX["left_knee"], JOINT_INDEX["left_ankle"]),
    (JOINT_INDEX["right_hip"], JOINT_INDEX["right_knee"], JOINT_INDEX["right_ankle"]),
)
_TOES = (JOINT_INDEX["left_foot"], JOINT_INDEX["right_foot"])
_MIN_CORRECTION_M = 1e-4
#: A body whose mean hip flexion exceeds this counts as seated (the procedural rule).
SEATED_HIP_FLEX_RAD = float(np.radians(35.0))
_ARMS_FROM_FLEX_RAD = np.radians(10.0)  # hip flexion below which the arms keep their pose


def _fk(frames: np.ndarray, body: MotionBody | None) -> tuple[np.ndarray, np.ndarray]:
    """Forward kinematics on ``body`` (None: the built-in skeleton)."""
    return forward_kinematics(frames) if body is None else body.forward_kinematics(frames)


def _fit(body: MotionBody | None) -> MotionBody | None:
    """None for the built-in body (its code paths are kept as they were), else ``body``."""
    return None if body is None or body.is_builtin else body


def planted_mask(
    frames: np.ndarray,
    support_y: float,
    max_speed_m_s: float | None = PLANTED_SPEED_M_S,
    body: MotionBody | None = None,
) -> np.ndarray:
    """``bool (T, 2)``: which feet (left, right) are planted in each of ``(T, 75)`` frames
    of ``body`` (default: the built-in skeleton).

    Frame 0 is judged by height only (no previous frame to measure speed from);
    ``max_speed_m_s=None`` judges every frame by height only.
    """
    frames = np.asarray(frames, dtype=np.float64)
    body = _fit(body)
    pos, _ = _fk(frames, body)
    low = sole_heights(frames, body) - float(support_y) <= PLANTED_HEIGHT_M
    ankles = pos[:, [leg[2] for leg in _LEGS]]  # (T, 2, 3)
    speed = np.zeros(low.shape)
    speed[1:] = np.hypot(*(ankles[1:, :, [0, 2]] - ankles[:-1, :, [0, 2]]).transpose(2, 0, 1))
    speed *= _FPS
    if max_speed_m_s is None:
        return low
    return low & (speed <= max_speed_m_s)


def _axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    return matrix_from_rotvec(axis / np.linalg.norm(axis) * angle)


def _min_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation taking direction ``a`` to direction ``b``."""
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    axis = np.cross(a, b)
    s = float(np.linalg.norm(axis))
    c = float(np.clip(a @ b, -1.0, 1.0))
    if s < 1e-9:
        return np.eye(3)  # parallel (anti-parallel cannot happen for a small correction)
    return _axis_angle_matrix(axis, float(np.arctan2(s, c)))


def _solve_leg(
    frame: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    leg: tuple[int, int, int],
    target: np.ndarray,
) -> None:
    """Rewrite the hip, knee and ankle rotations of ``frame`` (in place) so that the ankle
    reaches ``target`` (as close as the bone lengths allow) with the foot's world
    orientation unchanged. ``pos``/``rot`` are the frame's FK results."""
    hip, knee, ankle = leg
    h, k, a = pos[hip], pos[knee], pos[ankle]
    r_parent, r_hip, r_knee, r_ankle = rot[PARENTS[hip]], rot[hip], rot[knee], rot[ankle]
    thigh, shin = float(np.linalg.norm(k - h)), float(np.linalg.norm(a - k))
    reach = float(np.linalg.norm(target - h))
    reach = float(np.clip(reach, abs(thigh - shin) + 1e-4, thigh + shin - 1e-4))
    # 1. knee: rotate the shin s about the flexion axis n so that |K + Q s - H| = reach
    n = r_knee[:, 0] / np.linalg.norm(r_knee[:, 0])
    s, u = a - k, h - k
    un, ns = float(u @ n), float(n @ s)
    coef_cos = float(u @ s) - un * ns
    coef_sin = float(u @ np.cross(n, s))
    rhs = 0.5 * (thigh**2 + shin**2 - reach**2) - un * ns
    amp = float(np.hypot(coef_cos, coef_sin))
    q_knee = np.eye(3)
    if amp > 1e-9:
        phi = float(np.arctan2(coef_sin, coef_cos))
        spread = float(np.arccos(np.clip(rhs / amp, -1.0, 1.0)))
        delta = min(
            (phi + spread, phi - spread),
            key=lambda d: abs((d + np.pi) % (2.0 * np.pi) - np.pi),
        )
        q_knee = _axis_angle_matrix(n, delta)
    r_knee_new = q_knee @ r_knee
    a1 = k + q_knee @ s
    # 2. hip: swing the whole leg so the ankle lands on the target direction
    q_hip = _min_rotation(a1 - h, target - h)
    r_hip_new = q_hip @ r_hip
    r_knee_new = q_hip @ r_knee_new
    # 3. locals; the ankle keeps the original world orientation of the foot
    frame[6 + 3 * (hip - 1) : 9 + 3 * (hip - 1)] = rotvec_from_matrix(r_parent.T @ r_hip_new)
    frame[6 + 3 * (knee - 1) : 9 + 3 * (knee - 1)] = rotvec_from_matrix(r_hip_new.T @ r_knee_new)
    frame[6 + 3 * (ankle - 1) : 9 + 3 * (ankle - 1)] = rotvec_from_matrix(r_knee_new.T @ r_ankle)


def lock_planted_feet(
    frames: np.ndarray,
    previous_frame: np.ndarray,
    support_y: float,
    max_speed_m_s: float | None = PLANTED_SPEED_M_S,
    never_steps: bool = False,
    body: MotionBody | None = None,
) -> np.ndarray:
    """Pin planted feet of a chunk (see the module docstring).

    Args:
        frames: ``(T, 75)`` world frames of the new chunk.
        previous_frame: ``(75,)`` the frame just before (already emitted; never changed).
        support_y: world height of the floor (or stair tread) under the feet, metres.
        max_speed_m_s: planted feet move slower than this; None = planted by height alone.
        never_steps: for skills whose feet never step (Sit down): a foot planted in
            ``previous_frame`` stays planted for the whole chunk, with the world
            orientation it had there (flat as it stood), wherever the chunk takes it.
        body: the posed body (default: the built-in skeleton): its rest joints and feet.

    Returns:
        ``float64 (T, 75)``: a corrected copy (root and non-leg joints unchanged).

    Raises:
        ValueError: wrong shapes or non-finite values.
    """
    frames = np.array(frames, dtype=np.float64)
    prev = np.asarray(previous_frame, dtype=np.float64)
    if frames.ndim != 2 or frames.shape[1] != FRAME_DIM:
        raise ValueError(f"frames must have shape (T, {FRAME_DIM}), got {frames.shape}")
    if prev.shape != (FRAME_DIM,):
        raise ValueError(f"previous_frame must have shape ({FRAME_DIM},), got {prev.shape}")
    if not (np.all(np.isfinite(frames)) and np.all(np.isfinite(prev)) and np.isfinite(support_y)):
        raise ValueError("lock_planted_feet: frames, previous_frame and support_y must be finite")
    seq = np.concatenate([prev[None], frames])
    body = _fit(body)
    pos, rot = _fk(seq, body)
    planted = planted_mask(seq, support_y, max_speed_m_s, body)
    if never_steps:
        planted[:] = planted[0]
    targets = pos[:, [leg[2] for leg in _LEGS]].copy()  # (T+1, 2, 3) ankle targets
    for side in range(len(_LEGS)):
        anchor: np.ndarray | None = None
        release: np.ndarray | None = None  # offset being eased out after lift-off
        release_left = 0
        for t in range(len(seq)):
            original = pos[t, _LEGS[side][2]]
            if planted[t, side]:
                if anchor is None:
                    # a run starts: pin where the foot is (eased in from a pending release)
                    anchor = original + (release if release_left > 0 else 0.0)
                targets[t, side] = anchor
                release, release_left = anchor - original, 0
            else:
                if anchor is not None:
                    release_left = RELEASE_FRAMES
                    anchor = None
                if release is not None and release_left > 0:
                    weight = release_left / (RELEASE_FRAMES + 1.0)
                    targets[t, side] = original + weight * release
                    release_left -= 1
    out = seq.copy()
    for t in range(1, len(seq)):
        for side, leg in enumerate(_LEGS):
            rot_t = rot[t]
            if never_steps and planted[t, side]:
                rot_t = rot[t].copy()
                rot_t[leg[2]] = rot[0][leg[2]]
            if (
                np.linalg.norm(targets[t, side] - pos[t, leg[2]]) > _MIN_CORRECTION_M
                or rot_t is not rot[t]
            ):
                _solve_leg(out[t], pos[t], rot_t, leg, targets[t, side])
                # the hip rotation of this leg does not move the other leg: FK stays valid
    return out[1:]


def _heel_raised(
    frame: np.ndarray, side: int, theta_rad: float, body: MotionBody | None = None
) -> np.ndarray:
    """A copy of ``frame`` with one foot rolled onto its toes by ``theta_rad``: the toe joint
    stays where it is, the toe box keeps its world orientation, the leg is re-solved."""
    out = frame.copy()
    pos, rot = _fk(frame, body)
    leg, toe = _LEGS[side], _TOES[side]
    ankle = leg[2]
    r_ankle = rot[ankle] @ rot_x(float(theta_rad))  # plantar flexion: heel up
    rest = REST_JOINTS_M if body is None else body.rest_joints_m
    target = pos[toe] - r_ankle @ (rest[toe] - rest[ankle])
    rot_new = rot.copy()
    rot_new[ankle] = r_ankle
    _solve_leg(out, pos, rot_new, leg, target)
    out[6 + 3 * (toe - 1) : 9 + 3 * (toe - 1)] = rotvec_from_matrix(r_ankle.T @ rot[toe])
    return out


def _check_chunk(frames: np.ndarray, where: str) -> np.ndarray:
    frames = np.array(frames, dtype=np.float64)
    if frames.ndim != 2 or frames.shape[1] != FRAME_DIM or len(frames) < 1:
        raise ValueError(
            f"{where}: frames must have shape (T, {FRAME_DIM}) with T >= 1, got {frames.shape}"
        )
    if not np.all(np.isfinite(frames)):
        raise ValueError(f"{where}: frames must be finite")
    return frames


def hip_flexion_rad(frames: np.ndarray, body: MotionBody | None = None) -> np.ndarray:
    """Mean flexion of the two hips (rad; the thighs' forward swing from hanging straight
    down, in the pelvis frame) of ``(T, 75)`` frames, ``(T,)``. Above
    :data:`SEATED_HIP_FLEX_RAD` a body counts as seated (the procedural synthesizer's
    rule). Another ``body`` than the built-in one (whose pelvis may sit tipped back) is
    measured as the procedural synthesizer measures it: the thighs' swing in the heading
    frame plus the built-in seated pelvis tilt."""
    frames = _check_chunk(frames, "hip_flexion_rad")
    body = _fit(body)
    pos, rot = _fk(frames, body)
    flex = np.zeros(len(frames))
    if body is not None:
        from humanclaw_gym.motion.procedural import SEATED_PELVIS_TILT_RAD

        yaw = yaw_of_matrix(rot[:, 0])
        heading = rot_y(yaw)  # heading frame -> world
        for leg in _LEGS:
            thigh = np.einsum("tba,tb->ta", heading, pos[:, leg[1]] - pos[:, leg[0]])
            flex += 0.5 * (np.arctan2(thigh[:, 2], -thigh[:, 1]) + SEATED_PELVIS_TILT_RAD)
        return flex
    for leg in _LEGS:
        thigh = np.einsum("tba,tb->ta", rot[:, 0], pos[:, leg[1]] - pos[:, leg[0]])
        flex += 0.5 * np.arctan2(thigh[:, 2], -thigh[:, 1])
    return flex


def sit_back_to(frames: np.ndarray, previous_frame: np.ndarray, back_m: float) -> np.ndarray:
    """Scale a Sit down chunk's backward pelvis travel so that it ends ``back_m`` behind
    where it started.

    The travel is measured along the heading of ``previous_frame`` (the last history frame);
    every frame's pelvis moves along that axis by the same share of its own travel, so the
    path keeps its timing and its sideways and vertical parts. ``back_m = 0`` removes the
    travel along that axis (a seated body that sits again stays where it sits); otherwise a
    chunk whose pelvis does not move back by at least 5 cm is returned unchanged. Only the
    root position changes (the legs are re-solved afterwards by :func:`lock_planted_feet`).

    Args:
        frames: ``(T, 75)`` world frames of the Sit down chunk.
        previous_frame: ``(75,)`` the frame just before it.
        back_m: the backward travel wanted, metres (>= 0).

    Returns:
        ``float64 (T, 75)``: a corrected copy.
    """
    frames = _check_chunk(frames, "sit_back_to")
    prev = np.asarray(previous_frame, dtype=np.float64)
    if prev.shape != (FRAME_DIM,) or not np.all(np.isfinite(prev)):
        raise ValueError(f"sit_back_to: previous_frame must be ({FRAME_DIM},) finite values")
    if not (np.isfinite(back_m) and back_m >= 0.0):
        raise ValueError(f"sit_back_to: back_m={back_m!r} is invalid: allowed a finite number >= 0")
    yaw = float(heading_yaw(prev[3:6]))
    fwd = np.array([np.sin(yaw), 0.0, np.cos(yaw)])
    travel = (frames[:, :3] - prev[:3]) @ fwd  # (T,), negative backwards
    if back_m == 0.0:
        scale = 0.0
    elif -travel[-1] < 0.05:
        return frames
    else:
        scale = float(back_m) / float(-travel[-1])
    frames[:, :3] += ((scale - 1.0) * travel)[:, None] * fwd
    return frames


def rest_hands_on_thighs(frames: np.ndarray, body: MotionBody | None = None) -> np.ndarray:
    """Bring the hands of a Sit down chunk onto the thighs as the hips flex.

    In the chunk's last frame each arm gets the procedural synthesizer's seated pose (the
    wrist just above the thigh, :func:`humanclaw_gym.motion._arms.hand_on_thigh`); every
    frame turns its shoulder and elbow from the generated rotation toward that pose by the
    share of the hips' flexion it has reached (minimum-jerk from 10 degrees to the last
    frame's). A chunk whose last frame is not seated (mean hip flexion at most 35 degrees)
    is returned unchanged. Only the shoulder and elbow rotations change.

    Args:
        frames: ``(T, 75)`` world frames of the Sit down chunk.
        body: the posed body (default: the built-in skeleton).

    Returns:
        ``float64 (T, 75)``: a corrected copy.
    """
    from humanclaw_gym.motion import _arms

    frames = _check_chunk(frames, "rest_hands_on_thighs")
    body = _fit(body)
    pos, _ = _fk(frames, body)
    local = matrix_from_rotvec(frames[:, 3:].reshape(len(frames), -1, 3))  # (T, 24, 3, 3)
    flex = hip_flexion_rad(frames, body)
    if flex[-1] <= SEATED_HIP_FLEX_RAD:
        return frames
    u = np.clip((flex - _ARMS_FROM_FLEX_RAD) / (flex[-1] - _ARMS_FROM_FLEX_RAD), 0.0, 1.0)
    weight = u**3 * (10.0 - 15.0 * u + 6.0 * u * u)
    out = frames.copy()
    for side, sign in ((0, 1.0), (1, -1.0)):
        leg = _LEGS[side]
        thigh_pts = np.stack([pos[-1, leg[0]], pos[-1, leg[1]]])
        guess = (-sign * np.radians(82.0), np.radians(15.0), np.radians(15.0))
        params = _arms.hand_on_thigh(local[-1], pos[-1, 0], side, thigh_pts, guess, body)
        seated = _arms.arm_rotations(*params, side, body)
        for joint, target in zip((_arms.SHOULDER[side], _arms.ELBOW[side]), seated, strict=True):
            current = local[:, joint]
            delta = rotvec_from_matrix(np.swapaxes(current, -1, -2) @ target)  # (T, 3)
            new = current @ matrix_from_rotvec(weight[:, None] * delta)
            out[:, 3 + 3 * joint : 6 + 3 * joint] = rotvec_from_matrix(new)
    return out


def raise_heels_for_seat(
    frames: np.ndarray,
    support_y: float,
    seat_height_m: float,
    edge_ahead_m: float | None = None,
) -> np.ndarray:
    """Roll planted feet of a Sit down chunk onto their toes where the seat needs it.

    The procedural synthesizer's rule (``procedural.ProceduralMotionGenerator._sit_back``):
    in the chunk's last frame, the underside of each thigh ``edge_ahead_m`` in front of the
    pelvis (the seat's front edge; default ``SEAT_EDGE_AHEAD_M``, where it is after the full
    sit-back distance) must be at least ``THIGH_SEAT_CLEARANCE_M`` above the seated pelvis's
    lowest point (``support_y + seat_height_m - SEAT_SINK_M``); a foot on the support whose thigh is lower
    rolls onto its toes by the smallest angle that lifts it enough, growing in with the
    pelvis's descent over the chunk (minimum-jerk from 5 % to 100 % of it). A foot that would
    need more than ``SEATED_MAX_HEEL_RAISE_RAD`` (the procedural synthesizer lets such feet
    hang; a learned chunk decides that itself) and feet off the support are left as generated;
    so is a chunk that does not end seated (mean hip flexion at most ``SEATED_HIP_FLEX_RAD``).

    Args:
        frames: ``(T, 75)`` world frames of a Sit down chunk.
        support_y: world height of the floor under the feet, metres.
        seat_height_m: the seat's height above that floor, metres.
        edge_ahead_m: where the seat's front edge is, metres in front of the seated pelvis.

    Returns:
        ``float64 (T, 75)``: a corrected copy (only leg and toe joints change).
    """
    from humanclaw_gym.motion import _legs
    from humanclaw_gym.motion.procedural import (
        SEAT_EDGE_AHEAD_M,
        SEAT_SINK_M,
        SEATED_MAX_HEEL_RAISE_RAD,
        THIGH_SEAT_CLEARANCE_M,
    )

    frames = np.array(frames, dtype=np.float64)
    if frames.ndim != 2 or frames.shape[1] != FRAME_DIM or len(frames) < 1:
        raise ValueError(f"frames must have shape (T, {FRAME_DIM}) with T >= 1, got {frames.shape}")
    if not (np.all(np.isfinite(frames)) and np.isfinite(support_y) and np.isfinite(seat_height_m)):
        raise ValueError("raise_heels_for_seat: frames, support_y, seat_height_m must be finite")
    edge = SEAT_EDGE_AHEAD_M if edge_ahead_m is None else float(edge_ahead_m)
    if hip_flexion_rad(frames[-1:])[0] <= SEATED_HIP_FLEX_RAD:
        return frames  # not seated at the end: no thigh over a seat edge
    last = frames[-1]
    need = float(support_y) + float(seat_height_m) - SEAT_SINK_M + THIGH_SEAT_CLEARANCE_M
    yaw = float(heading_yaw(last[3:6]))
    on_floor = planted_mask(last[None], support_y, None)[0]
    raises = [0.0, 0.0]
    for side, leg in enumerate(_LEGS):
        if not on_floor[side]:
            continue

        def lift(theta: float, side: int = side, leg: tuple = leg) -> float:
            pos, _ = forward_kinematics(_heel_raised(last, side, theta) if theta > 0 else last)
            bottom = _legs.thigh_bottom_y(pos[leg[0]], pos[leg[1]], pos[0], yaw, edge)
            return bottom - need

        theta = _legs.smallest_raise(lift, SEATED_MAX_HEEL_RAISE_RAD)
        raises[side] = 0.0 if theta is None else theta  # out of reach: left as generated
    return raise_heels(frames, (raises[0], raises[1]))


def tip_pelvis(
    frames: np.ndarray,
    pitch_rad: float,
    roll_rad: float,
    body: MotionBody | None = None,
    full_flexion_rad: float | None = None,
) -> np.ndarray:
    """Turn the pelvis of a Sit down chunk toward a seated pitch and roll as the hips flex.

    The procedural synthesizer seats a body whose thighs reach lower than its pelvis with
    the pelvis tipped back and rolled (``ProceduralMotionGenerator._seat_plan``): each
    frame's root turns from its generated pitch and roll (its heading kept) toward
    ``pitch_rad`` (forward, about the body's left axis) and ``roll_rad`` (about its forward
    axis) by the share of the hips' flexion it has reached (as
    :func:`rest_hands_on_thighs`); ``spine1`` takes the turn back, so the torso keeps its
    world orientation. A chunk that does not end seated is returned unchanged; the legs are
    re-solved afterwards (:func:`lock_planted_feet`). With ``full_flexion_rad`` any chunk
    is turned, each frame by the share of that flexion its hips have (minimum-jerk from 10
    degrees to it): frames of a seated body all the way, standing ones not at all.

    Args:
        frames: ``(T, 75)`` world frames of the Sit down chunk.
        pitch_rad, roll_rad: the seated pelvis's pitch and roll.
        body: the posed body (default: the built-in skeleton).
        full_flexion_rad: see above (None: the chunk's last frame's flexion).

    Returns:
        ``float64 (T, 75)``: a corrected copy (root orientation and ``spine1`` change).
    """
    from humanclaw_gym.rotations import rot_z

    frames = _check_chunk(frames, "tip_pelvis")
    flex = hip_flexion_rad(frames, body)
    if full_flexion_rad is None:
        if flex[-1] <= SEATED_HIP_FLEX_RAD:
            return frames
        full = float(flex[-1])
    else:
        full = float(full_flexion_rad)
    u = np.clip((flex - _ARMS_FROM_FLEX_RAD) / (full - _ARMS_FROM_FLEX_RAD), 0.0, 1.0)
    weight = u**3 * (10.0 - 15.0 * u + 6.0 * u * u)
    root = matrix_from_rotvec(frames[:, 3:6])  # (T, 3, 3)
    target = rot_y(yaw_of_matrix(root)) @ (rot_x(float(pitch_rad)) @ rot_z(float(roll_rad)))
    delta = rotvec_from_matrix(np.swapaxes(root, -1, -2) @ target)
    new_root = root @ matrix_from_rotvec(weight[:, None] * delta)
    spine = 3 + 3 * JOINT_INDEX["spine1"]
    spine1 = matrix_from_rotvec(frames[:, spine : spine + 3])
    out = frames.copy()
    out[:, 3:6] = rotvec_from_matrix(new_root)
    out[:, spine : spine + 3] = rotvec_from_matrix(np.swapaxes(new_root, -1, -2) @ root @ spine1)
    return out


def raise_heels(
    frames: np.ndarray, raises_rad: tuple[float, float], body: MotionBody | None = None
) -> np.ndarray:
    """Roll the feet of a Sit down chunk onto their toes by ``raises_rad`` (left, right) at
    its end, growing in over the chunk (minimum-jerk from 5 % to 100 % of it), the toe
    joints where they are and the legs re-solved (:func:`raise_heels_for_seat` rolls its
    feet with it)."""
    frames = _check_chunk(frames, "raise_heels")
    if not any(r > 0.0 for r in raises_rad):
        return frames
    body = _fit(body)
    n = len(frames)
    u = np.clip((np.arange(1, n + 1) / n - 0.05) / 0.95, 0.0, 1.0)
    ramp = u**3 * (10.0 - 15.0 * u + 6.0 * u * u)
    out = frames.copy()
    for t in range(n):
        for side in (0, 1):
            if raises_rad[side] > 0.0 and ramp[t] > 0.0:
                out[t] = _heel_raised(out[t], side, raises_rad[side] * ramp[t], body)
    return out
