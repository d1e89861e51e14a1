"""Motion generation: skill calls -> 75-D whole-body frames at 30 Hz.

* :class:`ProceduralMotionGenerator` (``"procedural"``): the default, weight-free synthesizer.
* :mod:`humanclaw_gym.motion.canonical`: the floor-projected canonical frame and the 219-D
  model state shared by every generator.
* :mod:`humanclaw_gym.motion.rotations`: alias of the rotation helpers of :mod:`humanclaw_gym.rotations`.
* :mod:`humanclaw_gym.motion.flow` (``"flow"``) and :mod:`humanclaw_gym.motion.paper`
  (``"paper"``: the release's own model from the user's weight download): learned
  generators (torch, imported on first use).

The generator protocol itself lives in :mod:`humanclaw_gym.backends.protocols`.
"""

from __future__ import annotations

from humanclaw_gym.motion.canonical import (
    STATE_DIM,
    CanonicalFrame,
    canonical_frame,
    canonicalize,
    canonicalize_points,
    decanonicalize,
    decanonicalize_points,
    joint_positions_velocities,
    sole_heights,
    state_to_frames,
)
from humanclaw_gym.motion.procedural import (
    SEATED_PELVIS_ABOVE_SURFACE_M,
    SEATED_PELVIS_TILT_RAD,
    SIT_BACK_DISTANCE_M,
    ProceduralMotionGenerator,
    seated_pelvis_height,
)

__all__ = [
    "SEATED_PELVIS_ABOVE_SURFACE_M",
    "SEATED_PELVIS_TILT_RAD",
    "SIT_BACK_DISTANCE_M",
    "STATE_DIM",
    "CanonicalFrame",
    "ProceduralMotionGenerator",
    "canonical_frame",
    "canonicalize",
    "canonicalize_points",
    "decanonicalize",
    "decanonicalize_points",
    "joint_positions_velocities",
    "seated_pelvis_height",
    "sole_heights",
    "state_to_frames",
]
