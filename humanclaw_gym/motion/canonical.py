"""Canonical (floor-projected, heading-free) motion frames and the 219-D model state.

A learned motion model sees its history in a *canonical frame*: the world moved so that the
reference frame's pelvis sits above the origin and the floor is ``y = 0``, then turned about
the vertical axis so that the reference body faces ``+Z``. Its output is mapped back with the
inverse transform. This module owns that transform and the per-frame model state; the
procedural synthesizer uses the same helpers, so a learned generator can be swapped in
without changing what "canonical" means.

Definitions:

* :class:`CanonicalFrame`: ``origin_m`` (world point: reference pelvis ``x``/``z`` and the
  floor height ``y``) and ``yaw_rad`` (reference heading, see
  :func:`~humanclaw_gym.body.skeleton.heading_yaw`). World -> canonical is
  ``p_c = R_y(-yaw) (p_w - origin)``; root orientations are pre-multiplied by ``R_y(-yaw)``;
  joint rotations (relative to their parents) do not change.
* The floor of a reference frame, when not given, is the lowest point of its two foot boxes
  (:func:`sole_heights`), i.e. the surface the feet stand on.
* Model state (219-D per frame): the 75-D frame, then the 24 joint centres from forward
  kinematics (72, joint-major ``x, y, z``), then their velocities (72, m/s). Positions and
  velocities are in the same coordinates as the frame they come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from humanclaw_gym.body.skeleton import (
    FRAME_DIM,
    JOINT_INDEX,
    NUM_JOINTS,
    forward_kinematics,
    heading_yaw,
)
from humanclaw_gym.rotations import matrix_from_rotvec, rot_y, rotvec_from_matrix

__all__ = [
    "STATE_DIM",
    "CanonicalFrame",
    "canonical_frame",
    "canonicalize",
    "canonicalize_points",
    "decanonicalize",
    "decanonicalize_points",
    "foot_corner_offsets",
    "joint_positions_velocities",
    "sole_heights",
    "state_to_frames",
]

#: Size of the per-frame model state: 75 frame values + 24 x 3 positions + 24 x 3 velocities.
STATE_DIM = FRAME_DIM + 2 * 3 * NUM_JOINTS

_FOOT_JOINTS = (
    (JOINT_INDEX["left_ankle"], JOINT_INDEX["left_foot"]),
    (JOINT_INDEX["right_ankle"], JOINT_INDEX["right_foot"]),
)


@dataclass(frozen=True)
class CanonicalFrame:
    """A floor-projected, heading-aligned reference frame.

    Attributes:
        origin_m: world position of the canonical origin ``(x, floor_y, z)``, metres.
        yaw_rad: world heading that becomes the canonical ``+Z`` direction, radians.
    """

    origin_m: tuple[float, float, float]
    yaw_rad: float

    def __post_init__(self) -> None:
        origin = tuple(float(v) for v in self.origin_m)
        if len(origin) != 3 or not all(np.isfinite(origin)):
            raise ValueError(
                f"CanonicalFrame.origin_m={self.origin_m!r} is invalid: allowed 3 finite numbers"
            )
        if not np.isfinite(self.yaw_rad):
            raise ValueError(f"CanonicalFrame.yaw_rad={self.yaw_rad!r} is invalid: allowed finite")
        object.__setattr__(self, "origin_m", origin)
        object.__setattr__(self, "yaw_rad", float(self.yaw_rad))

    def rotation(self) -> np.ndarray:
        """``R_y(yaw)``: canonical axes -> world axes, ``(3, 3)``."""
        return rot_y(self.yaw_rad)


def _as_frames(frames: np.ndarray, name: str = "frames") -> np.ndarray:
    arr = np.asarray(frames, dtype=np.float64)
    if arr.ndim < 1 or arr.shape[-1] != FRAME_DIM:
        raise ValueError(f"{name} must have shape (..., {FRAME_DIM}), got {arr.shape}")
    return arr


def foot_corner_offsets() -> tuple[np.ndarray, np.ndarray]:
    """Corners of each foot's two boxes in their link frames (the built-in skeleton's:
    :meth:`humanclaw_gym.motion.bodyfit.MotionBody.builtin`; another body's are its
    ``ankle_corners`` / ``toe_corners``).

    Returns:
        ``(ankle_corners, toe_corners)``, each ``float64 (2, 8, 3)`` (left, right): the 8
        corners of the heel-to-ball box in the ankle joint frame and of the toe box in the
        foot (toe) joint frame, metres.
    """
    from humanclaw_gym.motion.bodyfit import MotionBody

    body = MotionBody.builtin()
    return body.ankle_corners, body.toe_corners


def sole_heights(frames: np.ndarray, body: Any = None) -> np.ndarray:
    """World height of the lowest point of each foot (heel box and toe box).

    Args:
        frames: ``(..., 75)`` frames.
        body: the posed body (:class:`~humanclaw_gym.motion.bodyfit.MotionBody`; default
            the built-in skeleton's): its rest joints and foot boxes.

    Returns:
        ``float64 (..., 2)``: lowest ``y`` of the left and the right foot, metres.
    """
    frames = _as_frames(frames)
    if body is None:
        pos, rot = forward_kinematics(frames)
        ankle_c, toe_c = foot_corner_offsets()
    else:
        pos, rot = body.forward_kinematics(frames)
        ankle_c, toe_c = body.ankle_corners, body.toe_corners
    result = []
    for side, (ankle, toe) in enumerate(_FOOT_JOINTS):
        y_heel = pos[..., ankle, None, 1] + np.einsum(
            "...b,kb->...k", rot[..., ankle, 1, :], ankle_c[side]
        )
        y_toe = pos[..., toe, None, 1] + np.einsum(
            "...b,kb->...k", rot[..., toe, 1, :], toe_c[side]
        )
        result.append(np.minimum(y_heel.min(axis=-1), y_toe.min(axis=-1)))
    return np.stack(result, axis=-1)


def canonical_frame(ref_frame: np.ndarray, floor_y: float | None = None) -> CanonicalFrame:
    """The canonical frame of one reference frame (usually the last history frame).

    Args:
        ref_frame: ``(75,)`` world frame.
        floor_y: floor height under the body; default: the lowest foot point of ``ref_frame``.

    Returns:
        origin at the pelvis ``x``/``z`` projected to the floor, heading of the pelvis.
    """
    ref = _as_frames(ref_frame, "ref_frame")
    if ref.shape != (FRAME_DIM,):
        raise ValueError(f"ref_frame must have shape ({FRAME_DIM},), got {ref.shape}")
    if not np.all(np.isfinite(ref)):
        raise ValueError("ref_frame must be finite")
    if floor_y is None:
        floor = float(sole_heights(ref).min())
    else:
        floor = float(floor_y)
        if not np.isfinite(floor):
            raise ValueError(f"floor_y={floor_y!r} is invalid: allowed a finite height in metres")
    yaw = float(heading_yaw(ref[3:6]))
    return CanonicalFrame((float(ref[0]), floor, float(ref[2])), yaw)


def _resolve(ref: CanonicalFrame | np.ndarray | None, frames: np.ndarray) -> CanonicalFrame:
    if isinstance(ref, CanonicalFrame):
        return ref
    if ref is None:
        if frames.ndim != 2 or frames.shape[0] == 0:
            raise ValueError("ref=None needs (T, 75) frames with T >= 1 (the last one is used)")
        return canonical_frame(frames[-1])
    return canonical_frame(np.asarray(ref, dtype=np.float64))


def _transform(frames: np.ndarray, rot: np.ndarray, shift: np.ndarray, pre: bool) -> np.ndarray:
    out = frames.copy()
    if pre:  # world -> canonical: p' = R (p - o)
        out[..., 0:3] = (frames[..., 0:3] - shift) @ rot.T
    else:  # canonical -> world: p' = R p + o
        out[..., 0:3] = frames[..., 0:3] @ rot.T + shift
    out[..., 3:6] = rotvec_from_matrix(rot @ matrix_from_rotvec(frames[..., 3:6]))
    return out


def canonicalize(frames: np.ndarray, ref: CanonicalFrame | np.ndarray | None = None) -> np.ndarray:
    """World frames -> canonical frames.

    Args:
        frames: ``(..., 75)`` world frames.
        ref: a :class:`CanonicalFrame`, a ``(75,)`` reference world frame (its floor is its
            lowest foot point), or None for the last of ``frames`` (``(T, 75)`` only).

    Returns:
        ``float64 (..., 75)`` frames in the canonical frame (fresh array).
    """
    frames = _as_frames(frames)
    cf = _resolve(ref, frames)
    return _transform(frames, rot_y(-cf.yaw_rad), np.asarray(cf.origin_m), pre=True)


def decanonicalize(frames_c: np.ndarray, ref: CanonicalFrame) -> np.ndarray:
    """Canonical frames -> world frames (inverse of :func:`canonicalize`).

    Args:
        frames_c: ``(..., 75)`` frames in the canonical frame ``ref``.
        ref: the :class:`CanonicalFrame` they are expressed in.
    """
    frames_c = _as_frames(frames_c, "frames_c")
    if not isinstance(ref, CanonicalFrame):
        raise TypeError(f"ref must be a CanonicalFrame, got {type(ref).__name__}")
    return _transform(frames_c, ref.rotation(), np.asarray(ref.origin_m), pre=False)


def canonicalize_points(points_m: np.ndarray, ref: CanonicalFrame) -> np.ndarray:
    """World points ``(..., 3)`` -> canonical coordinates."""
    p = np.asarray(points_m, dtype=np.float64)
    return (p - np.asarray(ref.origin_m)) @ rot_y(-ref.yaw_rad).T


def decanonicalize_points(points_c: np.ndarray, ref: CanonicalFrame) -> np.ndarray:
    """Canonical points ``(..., 3)`` -> world coordinates."""
    p = np.asarray(points_c, dtype=np.float64)
    return p @ ref.rotation().T + np.asarray(ref.origin_m)


def joint_positions_velocities(
    frames: np.ndarray, fps: float = 30.0, previous_frame: np.ndarray | None = None
) -> np.ndarray:
    """The 219-D model state of each frame: frame, joint positions, joint velocities.

    Args:
        frames: ``(T, 75)`` frames (any consistent coordinates, e.g. canonical).
        fps: frame rate for the velocities (Hz).
        previous_frame: optional ``(75,)`` frame just before ``frames[0]``; without it the
            first velocity repeats the second (zero when ``T == 1``).

    Returns:
        ``float64 (T, 219)``: ``[frame (75), positions (24*3), velocities (24*3)]``.
    """
    frames = _as_frames(frames)
    if frames.ndim != 2:
        raise ValueError(f"frames must have shape (T, {FRAME_DIM}), got {frames.shape}")
    if not (np.isfinite(fps) and fps > 0):
        raise ValueError(f"fps={fps!r} is invalid: allowed a finite number > 0")
    pos, _ = forward_kinematics(frames)
    pos = pos.reshape(frames.shape[0], 3 * NUM_JOINTS)
    vel = np.zeros_like(pos)
    if frames.shape[0] > 1:
        vel[1:] = (pos[1:] - pos[:-1]) * fps
        vel[0] = vel[1]
    if previous_frame is not None:
        prev = _as_frames(previous_frame, "previous_frame")
        if prev.shape != (FRAME_DIM,):
            raise ValueError(f"previous_frame must have shape ({FRAME_DIM},), got {prev.shape}")
        prev_pos, _ = forward_kinematics(prev)
        vel[0] = (pos[0] - prev_pos.reshape(-1)) * fps
    return np.concatenate([frames, pos, vel], axis=1)


def state_to_frames(states: np.ndarray) -> np.ndarray:
    """The 75-D frames inside ``(..., 219)`` model states (a fresh array)."""
    s = np.asarray(states, dtype=np.float64)
    if s.shape[-1] != STATE_DIM:
        raise ValueError(f"states must have shape (..., {STATE_DIM}), got {s.shape}")
    return s[..., :FRAME_DIM].copy()
