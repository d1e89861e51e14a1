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

:func:`raise_heels_for_seat` applies the procedural synthesizer's seat rule to a generated
Sit down chunk: on a seat above knee height, planted feet roll onto their toes (knees up)
until the thighs clear the seat's front edge (see ``procedural.SEAT_EDGE_AHEAD_M``).
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
from humanclaw_gym.motion.canonical import sole_heights
from humanclaw_gym.rotations import matrix_from_rotvec, rot_x, rotvec_from_matrix

__all__ = [
    "PLANTED_HEIGHT_M",
    "PLANTED_SPEED_M_S",
    "RELEASE_FRAMES",
    "lock_planted_feet",
    "planted_mask",
    "raise_heels_for_seat",
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


def planted_mask(
    frames: np.ndarray, support_y: float, max_speed_m_s: float | None = PLANTED_SPEED_M_S
) -> np.ndarray:
    """``bool (T, 2)``: which feet (left, right) are planted in each of ``(T, 75)`` frames.

    Frame 0 is judged by height only (no previous frame to measure speed from);
    ``max_speed_m_s=None`` judges every frame by height only.
    """
    frames = np.asarray(frames, dtype=np.float64)
    pos, _ = forward_kinematics(frames)
    low = sole_heights(frames) - float(support_y) <= PLANTED_HEIGHT_M
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
) -> np.ndarray:
    """Pin planted feet of a chunk (see the module docstring).

    Args:
        frames: ``(T, 75)`` world frames of the new chunk.
        previous_frame: ``(75,)`` the frame just before (already emitted; never changed).
        support_y: world height of the floor (or stair tread) under the feet, metres.
        max_speed_m_s: planted feet move slower than this; None = planted by height alone
            (for skills whose feet never step, e.g. Sit down).

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
    pos, rot = forward_kinematics(seq)
    planted = planted_mask(seq, support_y, max_speed_m_s)
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
            if np.linalg.norm(targets[t, side] - pos[t, leg[2]]) > _MIN_CORRECTION_M:
                _solve_leg(out[t], pos[t], rot[t], leg, targets[t, side])
                # the hip rotation of this leg does not move the other leg: FK stays valid
    return out[1:]


def _heel_raised(frame: np.ndarray, side: int, theta_rad: float) -> np.ndarray:
    """A copy of ``frame`` with one foot rolled onto its toes by ``theta_rad``: the toe joint
    stays where it is, the toe box keeps its world orientation, the leg is re-solved."""
    out = frame.copy()
    pos, rot = forward_kinematics(frame)
    leg, toe = _LEGS[side], _TOES[side]
    ankle = leg[2]
    r_ankle = rot[ankle] @ rot_x(float(theta_rad))  # plantar flexion: heel up
    target = pos[toe] - r_ankle @ (REST_JOINTS_M[toe] - REST_JOINTS_M[ankle])
    rot_new = rot.copy()
    rot_new[ankle] = r_ankle
    _solve_leg(out, pos, rot_new, leg, target)
    out[6 + 3 * (toe - 1) : 9 + 3 * (toe - 1)] = rotvec_from_matrix(r_ankle.T @ rot[toe])
    return out


def raise_heels_for_seat(frames: np.ndarray, support_y: float, seat_height_m: float) -> np.ndarray:
    """Roll planted feet of a Sit down chunk onto their toes where the seat needs it.

    The procedural synthesizer's rule (``procedural._seated_heel_raise``): in the chunk's last
    frame, the underside of each thigh ``SEAT_EDGE_AHEAD_M`` in front of the pelvis must be at
    least ``THIGH_SEAT_CLEARANCE_M`` above the seated pelvis's lowest point
    (``support_y + seat_height_m - SEAT_SINK_M``); a foot on the support whose thigh is lower
    rolls onto its toes by the smallest angle that lifts it enough, growing in with the
    pelvis's descent over the chunk (minimum-jerk from 5 % to 100 % of it). A foot that would
    need more than ``SEATED_MAX_HEEL_RAISE_RAD`` (the procedural synthesizer lets such feet
    hang; a learned chunk decides that itself) and feet off the support are left as generated.

    Args:
        frames: ``(T, 75)`` world frames of a Sit down chunk.
        support_y: world height of the floor under the feet, metres.
        seat_height_m: the seat's height above that floor, metres.

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
            bottom = _legs.thigh_bottom_y(pos[leg[0]], pos[leg[1]], pos[0], yaw, SEAT_EDGE_AHEAD_M)
            return bottom - need

        theta = _legs.smallest_raise(lift, SEATED_MAX_HEEL_RAISE_RAD)
        raises[side] = 0.0 if theta is None else theta  # out of reach: left as generated
    if not any(raises):
        return frames
    n = len(frames)
    u = np.clip((np.arange(1, n + 1) / n - 0.05) / 0.95, 0.0, 1.0)
    ramp = u**3 * (10.0 - 15.0 * u + 6.0 * u * u)
    out = frames.copy()
    for t in range(n):
        for side in (0, 1):
            if raises[side] > 0.0 and ramp[t] > 0.0:
                out[t] = _heel_raised(out[t], side, raises[side] * ramp[t])
    return out
