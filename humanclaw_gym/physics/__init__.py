"""Physics: the half-physics frame contract and the data it hands to metrics.

* :mod:`humanclaw_gym.physics.types` -- contact rows (:data:`CONTACT_DTYPE`), :data:`HUMAN_ID`.
* :mod:`humanclaw_gym.physics.contract` -- the frame contract's numbers and checks.
* :mod:`humanclaw_gym.physics.base` -- :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`,
  what every backend of the contract shares (each keeps only its engine calls).
* :mod:`humanclaw_gym.physics.pybullet_backend` -- :class:`PybulletHalfPhysics`, the pybullet
  implementation of :class:`~humanclaw_gym.backends.protocols.PhysicsBackend`;
  :mod:`humanclaw_gym.physics.mujoco_backend` -- the MuJoCo one.
* :mod:`humanclaw_gym.physics.rotations` -- alias of the quaternion helpers of :mod:`humanclaw_gym.rotations`.

Nothing here imports pybullet or MuJoCo at import time; a backend imports its engine in
``build``.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID, empty_contacts

__all__ = ["CONTACT_DTYPE", "HUMAN_ID", "PybulletHalfPhysics", "empty_contacts"]


def __getattr__(name: str) -> Any:
    if name == "PybulletHalfPhysics":
        from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

        return PybulletHalfPhysics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
