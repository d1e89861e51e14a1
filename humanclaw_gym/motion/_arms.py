"""Arm geometry for the motion generators: the arm parameters and hands resting on thighs.

The procedural synthesizer poses each arm with three numbers (body-frame conventions of
:mod:`humanclaw_gym.body.skeleton`, rest pose = T-pose): ``down``, the shoulder's lowering
from the T-pose about the body's forward axis (negative for the left arm, positive for the
right); ``flex``, the shoulder's forward swing about the body's left axis; ``bend``, the
elbow's flexion about the upper arm's own vertical axis (the forearm swings forward).
:func:`arm_rotations` turns them into the shoulder and elbow local rotations.

A seated body rests its hands on its thighs: :func:`hand_on_thigh` finds the three numbers
that put the wrist joint just above the thigh's top, where the arm reaches it with the elbow
slightly bent; both generators use it (the learned one through
:func:`humanclaw_gym.motion.footlock.rest_hands_on_thighs`).
"""

from __future__ import annotations

import numpy as np

from humanclaw_gym.body.skeleton import JOINT_INDEX, link_shapes
from humanclaw_gym.motion.bodyfit import MotionBody
from humanclaw_gym.rotations import rot_x, rot_y, rot_z

SHOULDER = (JOINT_INDEX["left_shoulder"], JOINT_INDEX["right_shoulder"])
ELBOW = (JOINT_INDEX["left_elbow"], JOINT_INDEX["right_elbow"])
# pelvis -> spine1 -> spine2 -> spine3 -> collar -> shoulder -> elbow -> wrist, per side
_CHAIN = tuple(
    tuple(
        JOINT_INDEX[n]
        for n in (
            "pelvis",
            "spine1",
            "spine2",
            "spine3",
            f"{side}_collar",
            f"{side}_shoulder",
            f"{side}_elbow",
            f"{side}_wrist",
        )
    )  # fmt: skip
    for side in ("left", "right")
)
#: Radii of the thigh and forearm capsules (m).
THIGH_RADIUS_M = float(link_shapes()[JOINT_INDEX["left_hip"]].radius)
FOREARM_RADIUS_M = float(link_shapes()[JOINT_INDEX["left_elbow"]].radius)
#: The resting wrist joint: this far above the thigh's top beyond the forearm's radius, this
#: far outward of the thigh's axis, where the thigh (hip 0, knee 1, between the candidates)
#: comes this far from the shoulder (the arm, shoulder to wrist, is 0.51 m: the elbow stays
#: slightly bent).
HAND_ABOVE_THIGH_M = 0.008
HAND_OUTWARD_M = 0.02
HAND_REACH_M = 0.47
#: ... and at least this far below the shoulder (hands resting, not held out).
HAND_MIN_DROP_M = 0.33
_THIGH_POINTS = np.linspace(0.15, 0.7, 12)
# a relaxed arm: lowered 55-100 degrees from the T-pose, flexed -20 to 60, elbow 0-120
_DOWN_RAD = (np.radians(55.0), np.radians(100.0))
_FLEX_RAD = (np.radians(-20.0), np.radians(60.0))
_BEND_RAD = (0.0, np.radians(120.0))


def _crossing(us: np.ndarray, values: np.ndarray, level: float) -> float | None:
    """The first ``u`` where the sampled ``values`` grow to ``level`` (linear between the
    samples around it), None if they never do."""
    for k in range(len(us)):
        if values[k] >= level:
            if k == 0:
                return float(us[0])
            t = (level - values[k - 1]) / (values[k] - values[k - 1])
            return float(us[k - 1] + (us[k] - us[k - 1]) * t)
    return None


def _rest_point(point, shoulder: np.ndarray) -> float:
    """Where along the thigh (``u``) the hand rests: the first point ``HAND_REACH_M`` from
    the shoulder, searched from the hip up to where the wrist would come within
    ``HAND_MIN_DROP_M`` of the shoulder's height (on a low seat the thigh rises towards the
    knee); the end of that range when the arm reaches farther, the hip's end when even that
    is too far. Continuous in the pose (crossings interpolated between samples)."""
    us = _THIGH_POINTS
    pts = np.array([point(float(u)) for u in us])
    below = shoulder[1] - pts[:, 1]
    u_hi = _crossing(us, -below, -HAND_MIN_DROP_M)  # the first u that is too high
    u_hi = float(us[-1]) if u_hi is None else u_hi
    if u_hi <= us[0]:
        return float(us[0])
    reach = np.linalg.norm(pts - shoulder, axis=1)
    u = _crossing(us, reach, HAND_REACH_M)
    return u_hi if u is None or u > u_hi else u


def arm_rotations(
    down, flex, bend, side: int, body: MotionBody | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Shoulder and elbow local rotations ``(..., 3, 3)`` of the arm parameters (radians,
    scalars or arrays) of arm ``side`` (0 left, 1 right), for ``body`` (default: the
    built-in skeleton; another body's rest arms are first turned onto the built-in's,
    :meth:`~humanclaw_gym.motion.bodyfit.MotionBody.arm_locals`)."""
    sign = 1.0 if side == 0 else -1.0
    shoulder, elbow = rot_x(-flex) @ rot_z(down), rot_y(-sign * bend)
    if body is None:
        return shoulder, elbow
    return body.arm_locals(shoulder, elbow, side)


def hand_on_thigh(
    local: np.ndarray,
    pelvis: np.ndarray,
    side: int,
    thigh: np.ndarray,
    guess: tuple[float, float, float],
    body: MotionBody | None = None,
) -> np.ndarray:
    """Arm parameters ``(down, flex, bend)`` that rest the hand of arm ``side`` on the thigh
    ``(hip, knee)`` (world or canonical points, ``(2, 3)``), given the frame's pelvis
    position and its ``(24, 3, 3)`` local rotations (those of the spine and collar are
    used).

    The wrist joint goes above the thigh's top (by the forearm's radius and
    ``HAND_ABOVE_THIGH_M``, ``HAND_OUTWARD_M`` outward of its axis) at the first point along
    the thigh ``HAND_REACH_M`` from the shoulder, at least ``HAND_MIN_DROP_M`` below it (see
    ``_rest_point``); Gauss-Newton with
    a finite-difference Jacobian from ``guess``, kept within a relaxed arm's range (so a
    target out of reach gives the nearest relaxed pose).

    ``body`` (default: the built-in skeleton's): the arm's and torso's rest joints, the
    thigh's top and the forearm's radius (:class:`~humanclaw_gym.motion.bodyfit.MotionBody`);
    the parameters are those of :func:`arm_rotations` for the same body."""
    chain = _CHAIN[side]
    sign = 1.0 if side == 0 else -1.0
    fit = MotionBody.builtin() if body is None else body
    rest = fit.rest_joints_m
    rot = local[0]
    pos = np.asarray(pelvis, dtype=np.float64)
    for parent, child in zip(chain[:4], chain[1:5], strict=True):  # up to the collar
        pos = pos + rot @ (rest[child] - rest[parent])
        rot = rot @ local[child]
    shoulder = pos + rot @ (rest[chain[5]] - rest[chain[4]])
    upper, fore = fit.arm_vectors(side)
    hip, knee = np.asarray(thigh, dtype=np.float64)
    axis = knee - hip
    slope = np.arctan2(-axis[1], np.hypot(axis[0], axis[2]))
    outward = local[0] @ np.array([sign * HAND_OUTWARD_M, 0.0, 0.0])
    if fit.thigh_top_m is None:
        lift = (
            THIGH_RADIUS_M / max(float(np.cos(slope)), 0.5) + FOREARM_RADIUS_M + HAND_ABOVE_THIGH_M
        )

        def point(u: float) -> np.ndarray:
            return hip + u * axis + outward + np.array([0.0, lift, 0.0])

    else:
        incline = max(float(np.cos(slope)), 0.5)

        def point(u: float) -> np.ndarray:
            top = fit.thigh_top(side, u) / incline + fit.forearm_radius_m + HAND_ABOVE_THIGH_M
            return hip + u * axis + outward + np.array([0.0, top, 0.0])

    target = point(_rest_point(point, shoulder))

    def wrist(x: np.ndarray) -> np.ndarray:
        r_s = rot @ rot_x(-x[1]) @ rot_z(x[0])
        return shoulder + r_s @ (upper + rot_y(-sign * x[2]) @ fore)

    x = np.array(guess, dtype=np.float64)
    for _ in range(12):
        err = wrist(x) - target
        if float(err @ err) < 1e-10:
            break
        jac = np.empty((3, 3))
        for k in range(3):
            dx = np.zeros(3)
            dx[k] = 1e-6
            jac[:, k] = (wrist(x + dx) - wrist(x - dx)) / 2e-6
        step = np.linalg.lstsq(jac.T @ jac + 1e-6 * np.eye(3), -jac.T @ err, rcond=None)[0]
        x = x + step
        x[0] = -sign * float(np.clip(-sign * x[0], *_DOWN_RAD))
        x[1] = float(np.clip(x[1], *_FLEX_RAD))
        x[2] = float(np.clip(x[2], *_BEND_RAD))
    return x
