"""Quaternion helpers of the physics backend: an alias module of :mod:`humanclaw_gym.rotations`
(the package's one rotation module), kept so existing imports keep working."""

from __future__ import annotations

from humanclaw_gym.rotations import (
    cap_rotvec,
    quat_conj,
    quat_exp,
    quat_log,
    quat_mul,
    quat_normalize,
    quat_rotate,
)

__all__ = [
    "cap_rotvec",
    "quat_conj",
    "quat_exp",
    "quat_log",
    "quat_mul",
    "quat_normalize",
    "quat_rotate",
]
