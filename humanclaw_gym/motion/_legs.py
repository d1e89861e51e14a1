"""Leg geometry and analytic leg inverse kinematics for the procedural synthesizer.

Body-frame conventions (see :mod:`humanclaw_gym.body.skeleton`): ``+Z`` forward, ``+X`` left,
``+Y`` up. A positive rotation about ``+X`` swings a downward limb backwards, so hip flexion
is negative about ``X`` and knee flexion positive; a foot rotation ``rot_x(+a)`` points the
toes down (plantar flexion).

A foot's pose is described by its *flat* ankle position (where the ankle joint is when the
sole lies flat on its support), its yaw, its pitch and the toe-joint angle. On tiptoe the
foot pivots about its toe joint, which stays fixed, while the toe joint bends back by the
same angle so that the toe box stays flat on the ground.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from humanclaw_gym.body.skeleton import JOINT_INDEX, link_shapes
from humanclaw_gym.motion.bodyfit import MotionBody, capsule_thigh_bottom_y
from humanclaw_gym.rotations import rot_x, rot_y

HIP = (JOINT_INDEX["left_hip"], JOINT_INDEX["right_hip"])
KNEE = (JOINT_INDEX["left_knee"], JOINT_INDEX["right_knee"])
ANKLE = (JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"])
TOE = (JOINT_INDEX["left_foot"], JOINT_INDEX["right_foot"])

#: Deepest knee flexion the solver produces (rad).
MAX_KNEE_FLEX_RAD = np.radians(160.0)
#: Radius of the thigh's collision capsule (m).
THIGH_RADIUS_M = float(link_shapes()[HIP[0]].radius)


@dataclass(frozen=True)
class LegGeometry:
    """Rest geometry of one leg of a :class:`~humanclaw_gym.motion.bodyfit.MotionBody`
    (body frame, metres).

    Attributes:
        hip_offset: hip joint relative to the pelvis joint.
        thigh: hip -> knee bone vector; ``shin``: knee -> ankle; ``toe``: ankle -> toe joint.
        reach_max: hip-ankle distance with the knee at its rest angle (fully straight), or
            at the body's least knee flexion (``MotionBody.knee_bend_rad``).
        reach_min: hip-ankle distance at the deepest knee flexion.
        flat_height: ankle joint height above the sole with the foot flat.
    """

    hip_offset: np.ndarray
    thigh: np.ndarray
    shin: np.ndarray
    toe: np.ndarray
    reach_max: float
    reach_min: float
    flat_height: float
    knee_p: float
    knee_q: float
    knee_const: float


@lru_cache(maxsize=8)
def leg_geometry(body: MotionBody | None = None) -> tuple[LegGeometry, LegGeometry]:
    """Geometry of the left and the right leg of ``body`` (default: the built-in
    skeleton's)."""
    body = MotionBody.builtin() if body is None else body
    rest = body.rest_joints_m
    legs = []
    for side in (0, 1):
        hip, knee, ankle, toe = HIP[side], KNEE[side], ANKLE[side], TOE[side]
        t0 = rest[knee] - rest[hip]
        s0 = rest[ankle] - rest[knee]
        f0 = rest[toe] - rest[ankle]
        # |t0 + R_x(phi) s0|^2 = |t0|^2 + |s0|^2 + 2 (t0x s0x + P cos(phi) + Q sin(phi))
        p = t0[1] * s0[1] + t0[2] * s0[2]
        q = t0[2] * s0[1] - t0[1] * s0[2]
        const = float(t0 @ t0 + s0 @ s0) / 2.0 + t0[0] * s0[0]
        if body.knee_bend_rad > 0.0:  # the knee never straightens fully
            reach_max = float(np.linalg.norm(t0 + rot_x(body.knee_bend_rad) @ s0))
        else:
            reach_max = float(np.linalg.norm(t0 + s0))
        reach_min = float(np.linalg.norm(t0 + rot_x(MAX_KNEE_FLEX_RAD) @ s0))
        flat_height = -_lowest_offset_single(side, 0.0, 0.0, body)
        for arr in (t0, s0, f0):
            arr.setflags(write=False)
        hip_offset = rest[hip].copy()
        hip_offset.setflags(write=False)
        legs.append(
            LegGeometry(hip_offset, t0, s0, f0, reach_max, reach_min, flat_height, p, q, const)
        )
    return legs[0], legs[1]


def _lowest_offset_single(
    side: int, pitch_rad: float, toe_rad: float, body: MotionBody | None = None
) -> float:
    return float(lowest_offset(side, np.array([pitch_rad]), np.array([toe_rad]), body)[0])


def lowest_offset(
    side: int, pitch_rad: np.ndarray, toe_rad: np.ndarray, body: MotionBody | None = None
) -> np.ndarray:
    """Height of the foot's lowest point relative to its ankle joint, ``(n,)`` metres.

    The foot of ``body`` (default: the built-in skeleton's) is pitched by ``pitch_rad``
    (toes down positive) and its toe joint bent by ``toe_rad`` (same sign convention,
    relative to the foot); yaw does not matter.
    """
    body = MotionBody.builtin() if body is None else body
    ankle_c, toe_c = body.ankle_corners, body.toe_corners
    pitch = np.atleast_1d(np.asarray(pitch_rad, dtype=np.float64))
    toe = np.atleast_1d(np.asarray(toe_rad, dtype=np.float64))
    r_foot = rot_x(pitch)  # (n, 3, 3)
    toe_joint = body.rest_joints_m[TOE[side]] - body.rest_joints_m[ANKLE[side]]
    heel_pts = np.einsum("nab,kb->nka", r_foot, ankle_c[side])
    toe_local = np.einsum("nab,kb->nka", rot_x(toe), toe_c[side]) + toe_joint
    toe_pts = np.einsum("nab,nkb->nka", r_foot, toe_local)
    return np.minimum(heel_pts[..., 1].min(axis=1), toe_pts[..., 1].min(axis=1))


def knee_angle(leg: LegGeometry, distance_m: np.ndarray | float) -> np.ndarray:
    """Knee flexion (rad) that puts the ankle ``distance_m`` from the hip (clamped to reach)."""
    m, delta = _knee_constants(leg.knee_p, leg.knee_q)
    if isinstance(distance_m, float):  # one distance: the same operations on floats
        d = clip_float(float(distance_m), leg.reach_min, leg.reach_max)
        k = d**2 / 2.0 - leg.knee_const
        phi = delta + np.arccos(clip_float(k / m, -1.0, 1.0))
        return np.float64(clip_float(float(phi), 0.0, MAX_KNEE_FLEX_RAD))
    d = np.clip(np.asarray(distance_m, dtype=np.float64), leg.reach_min, leg.reach_max)
    k = d**2 / 2.0 - leg.knee_const
    phi = delta + np.arccos(np.clip(k / m, -1.0, 1.0))
    return np.clip(phi, 0.0, MAX_KNEE_FLEX_RAD)


@lru_cache(maxsize=8)
def _knee_constants(p: float, q: float) -> tuple[np.float64, np.float64]:
    """Amplitude ``hypot(p, q)`` and phase ``arctan2(q, p)`` of a leg's knee equation."""
    return np.hypot(p, q), np.arctan2(q, p)


def clip_float(u: float, lo: float, hi: float) -> float:
    """``np.clip`` of one Python float, value for value (ties keep ``u``, so ``-0.0`` stays
    ``-0.0``; NaN stays NaN), without numpy's per-call overhead."""
    if u < lo:
        u = lo
    if u > hi:
        u = hi
    return u


def _norm3(v: np.ndarray) -> np.float64:
    """``np.linalg.norm`` of a 1-D vector (the same ``dot`` and ``sqrt``)."""
    return np.sqrt(v.dot(v))


def _columns(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``np.stack([a, b, c], axis=1)`` of three 3-vectors (C-contiguous ``(3, 3)``)."""
    out = np.empty((3, 3))
    out[:, 0] = a
    out[:, 1] = b
    out[:, 2] = c
    return out


def _linspace(start: float, stop: float, num: int) -> np.ndarray:
    """``np.linspace(start, stop, num)`` for two floats and ``num >= 2``, the same steps."""
    y = np.arange(0, num, dtype=np.float64)
    delta = np.subtract(stop, start, dtype=np.float64)
    div = num - 1
    step = delta / div
    if step == 0:
        y /= div
        y *= delta
    else:
        y *= step
    y += start
    y[-1] = stop
    return y


def _cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross`` of two 3-vectors (the same products and differences)."""
    a0, a1, a2 = float(a[0]), float(a[1]), float(a[2])
    b0, b1, b2 = float(b[0]), float(b[1]), float(b[2])
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def tiptoe_ankle(
    leg: LegGeometry, flat_ankle: np.ndarray, yaw_rad: float, theta_rad: np.ndarray
) -> np.ndarray:
    """Ankle positions ``(n, 3)`` of a foot rolled onto its toes by ``theta_rad`` ``(n,)``.

    The toe joint (pivot) stays where it is when the foot is flat at ``flat_ankle``.
    """
    r_yaw = rot_y(yaw_rad)
    pivot = np.asarray(flat_ankle, dtype=np.float64) + r_yaw @ leg.toe
    theta = np.atleast_1d(np.asarray(theta_rad, dtype=np.float64))
    return pivot - np.einsum("ab,nbc,c->na", r_yaw, rot_x(theta), leg.toe)


def max_hip_height(
    leg: LegGeometry,
    flat_ankle: np.ndarray,
    yaw_rad: float,
    hip_xz: np.ndarray,
    max_tiptoe_rad: float,
) -> float:
    """Highest hip joint height from which the leg still reaches a planted foot.

    Args:
        leg: the leg's geometry.
        flat_ankle: ``(3,)`` flat ankle position of the planted foot.
        yaw_rad: the foot's yaw.
        hip_xz: ``(2,)`` horizontal hip position ``(x, z)``.
        max_tiptoe_rad: largest allowed heel raise.
    """
    n = max(2, int(np.degrees(max_tiptoe_rad) / 2.5) + 1)
    thetas = _linspace(0.0, max(max_tiptoe_rad, 0.0), n)
    ankles = tiptoe_ankle(leg, flat_ankle, yaw_rad, thetas)
    horiz = np.hypot(ankles[:, 0] - hip_xz[0], ankles[:, 2] - hip_xz[1])
    reach = leg.reach_max * 0.9995
    ok = horiz < reach
    if not np.any(ok):
        return float(ankles[:, 1].max())  # the foot cannot be reached: no useful bound
    heights = ankles[ok, 1] + np.sqrt(reach**2 - horiz[ok] ** 2)
    return float(heights.max())


def solve_tiptoe(
    leg: LegGeometry,
    hip: np.ndarray,
    flat_ankle: np.ndarray,
    yaw_rad: float,
    min_rad: float,
    max_rad: float,
) -> float:
    """Smallest heel raise in ``[min_rad, max(min_rad, max_rad)]`` that lets the leg reach."""
    hi = max(min_rad, max_rad)
    thetas = _linspace(min_rad, hi, max(2, int(np.degrees(hi - min_rad) / 0.25) + 1))
    ankles = tiptoe_ankle(leg, flat_ankle, yaw_rad, thetas)
    dist = np.linalg.norm(ankles - hip, axis=1)
    ok = (dist <= leg.reach_max * 0.9999).nonzero()[0]
    if ok.size == 0:
        return float(thetas[np.argmin(dist)])
    return float(thetas[ok[0]])


def solve_leg(
    leg: LegGeometry,
    hip: np.ndarray,
    pelvis_rot: np.ndarray,
    ankle_target: np.ndarray,
    foot_rot: np.ndarray,
    hinge_axis: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Analytic two-bone IK with a hinge knee.

    Args:
        leg: the leg's geometry.
        hip: ``(3,)`` world hip position.
        pelvis_rot: ``(3, 3)`` global pelvis rotation.
        ankle_target: ``(3,)`` desired ankle position (reached when within reach, else the
            leg points at it fully stretched or fully bent).
        foot_rot: ``(3, 3)`` desired global rotation of the ankle (foot) link.
        hinge_axis: ``(3,)`` desired direction of the knee's hinge axis (the body's left;
            the knee then bends forwards).

    Returns:
        Local rotation matrices of the hip, the knee and the ankle, each ``(3, 3)``.
    """
    # (Speed: the norms are np.linalg.norm's own dot + sqrt and the cross products its own
    # component products, written out; every value is bit-identical to the library calls.)
    d = np.asarray(ankle_target, dtype=np.float64) - hip
    dist = float(_norm3(d))
    d_hat = d / dist if dist > 1e-9 else np.array([0.0, -1.0, 0.0])
    phi = float(knee_angle(leg, dist))  # (a scalar rewrite differed in the last bit)
    r_knee = rot_x(phi)
    leg_vec = leg.thigh + r_knee @ leg.shin
    l_hat = leg_vec / _norm3(leg_vec)
    x_axis = np.array([1.0, 0.0, 0.0])
    x_perp = x_axis - (x_axis @ l_hat) * l_hat
    x_perp /= _norm3(x_perp)
    a_perp = hinge_axis - (hinge_axis @ d_hat) * d_hat
    norm = _norm3(a_perp)
    if norm < 1e-6:  # hinge along the leg: fall back on the pelvis' left axis
        fallback = pelvis_rot[:, 0]
        a_perp = fallback - (fallback @ d_hat) * d_hat
        norm = _norm3(a_perp)
    a_perp /= norm
    src = _columns(l_hat, x_perp, _cross3(l_hat, x_perp))
    dst = _columns(d_hat, a_perp, _cross3(d_hat, a_perp))
    g_hip = dst @ src.T
    hip_local = pelvis_rot.T @ g_hip
    g_knee = g_hip @ r_knee
    ankle_local = g_knee.T @ foot_rot
    return hip_local, r_knee, ankle_local


def thigh_bottom_y(
    hip: np.ndarray, knee: np.ndarray, pelvis: np.ndarray, yaw_rad: float, ahead_m: float
) -> float:
    """Height of the underside of a thigh capsule ``ahead_m`` in front of the pelvis joint.

    The thigh runs from ``hip`` to ``knee`` (world points); "in front" is measured along the
    heading ``yaw_rad`` from ``pelvis``, and clamped to the thigh's extent.
    """
    return capsule_thigh_bottom_y(hip, knee, pelvis, yaw_rad, ahead_m, THIGH_RADIUS_M)


def smallest_raise(lift: Callable[[float], float], max_rad: float) -> float | None:
    """Smallest angle in ``[0, max_rad]`` with ``lift(angle) >= 0``, for a ``lift`` that grows
    with the angle: sampled every degree, the crossing linearly interpolated between the two
    samples around it (so the result moves continuously with the inputs). None if even
    ``max_rad`` is not enough."""
    thetas = np.radians(np.arange(0.0, np.degrees(max_rad) + 1e-9, 1.0))
    if thetas[-1] < max_rad:
        thetas = np.append(thetas, max_rad)
    prev_t, prev_v = None, None
    for theta in thetas:
        value = float(lift(float(theta)))
        if value >= 0.0:
            if prev_t is None:
                return 0.0
            return float(prev_t + (theta - prev_t) * (-prev_v) / (value - prev_v))
        prev_t, prev_v = float(theta), value
    return None
