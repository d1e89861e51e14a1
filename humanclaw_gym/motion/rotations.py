"""Rotation helpers of the motion generators: an alias module of :mod:`humanclaw_gym.rotations`
(the package's one rotation module), kept so existing imports keep working."""

from __future__ import annotations

from humanclaw_gym.rotations import (
    matrix_from_rotvec,
    relative_angle,
    rot_x,
    rot_y,
    rot_z,
    rotvec_from_matrix,
    wrap_angle,
    yaw_of_matrix,
)

__all__ = [
    "matrix_from_rotvec",
    "relative_angle",
    "rot_x",
    "rot_y",
    "rot_z",
    "rotvec_from_matrix",
    "wrap_angle",
    "yaw_of_matrix",
]
