"""The reference release's per-frame arithmetic, where it differs from this package's.

The release's half-physics (its ``hp_step`` and the environment around it) and this
package's backends make the same kinds of engine calls (a root velocity written before
chosen substeps, joint velocities written once per frame, spherical position motors). Where
the numbers written differ, ``release_arithmetic=True`` on a physics backend (the paper
profile's default, :mod:`humanclaw_gym.profiles`) makes them the release's; this module
holds that arithmetic, re-derived from the release's documented behaviour in this
package's own code, for both backends and for the simulation's spawn:

* **spawn** (:func:`release_spawn_frame`): the release puts its body's root link at the
  motion's SMPL translation plus ``shift.npy`` row 0, both turned by its fixed Z-up-to-
  Habitat rotation (the shift is applied in the world, not turned with the body), starting
  from the first frame of the seed state placed at the episode's ``init_offset``;
* **first frame of a chunk** (:func:`first_in_chunk`): no translation command (its
  displacement from the previous chunk's last frame is dropped);
* **physics input** (:func:`zero_neck_head`): neck and head zeroed (its motion
  checkpoints' convention), the two SMPL hand joints too (its conversion keeps the first 21
  body joints: its SMPL-X bodies have no hand joint);
* **root velocity**: written and read as the velocity of the root link's centre of mass
  (the engine's base velocity), not of the root joint (the same for the release's bodies,
  whose root link has its centre of mass at its origin);
* **joint drive** (:func:`joint_drive`): every joint's velocity, written once before
  substep 0, is the shortest-arc rate from the realized rotation to the generated one,
  capped at 30 degrees per frame; each joint's position motor (gain: its PJSC gain) targets
  the realized rotation advanced by ``k / 4`` of the *uncapped* rate before substep ``k``.

The root's x/z, vertical (root-only gravity) and angular commands are already the same in
both (``docs/paper.md``). No simulator is imported here.
"""

from __future__ import annotations

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM, JOINT_INDEX
from humanclaw_gym.physics.contract import (
    FRAMES_PER_CHUNK,
    MAX_DRIVE_PER_FRAME_RAD,
    SUBSTEPS_PER_FRAME,
)
from humanclaw_gym.rotations import (
    cap_rotvec,
    matrix_from_rotvec,
    quat_conj,
    quat_exp,
    quat_log,
    quat_mul,
    rotvec_from_matrix,
)

__all__ = [
    "MOTION_TO_WORLD",
    "NECK_HEAD_JOINTS",
    "RELEASE_MOTOR_FORCE",
    "ZUP_TO_WORLD",
    "first_in_chunk",
    "joint_drive",
    "release_spawn_frame",
    "zero_neck_head",
]

#: The release's fixed rotation from its physics' Z-up body frame to Habitat's Y-up world
#: (this package's world): ``(x, y, z) -> (-x, z, y)``; it turns ``shift.npy`` row 0.
ZUP_TO_WORLD = np.array([[-1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
#: The release's Y-up motion world -> this package's world (its Z-up conversion followed by
#: :data:`ZUP_TO_WORLD`): a half turn about +Y, x and z negated.
MOTION_TO_WORLD = np.diag([-1.0, 1.0, -1.0])
#: Frame joints the release zeroes in its physics input: neck and head (its motion
#: checkpoints' convention) and the two SMPL hand joints (its conversion to SMPL-X keeps the
#: first 21 body joints).
NECK_HEAD_JOINTS: tuple[str, ...] = ("neck", "head", "left_hand", "right_hand")
_NECK_HEAD_COLUMNS = np.concatenate(
    [np.arange(3 + 3 * JOINT_INDEX[name], 6 + 3 * JOINT_INDEX[name]) for name in NECK_HEAD_JOINTS]
)
#: Largest force of the release's joint motors: unbounded (its motors' impulse is infinite).
RELEASE_MOTOR_FORCE = float("inf")


def first_in_chunk(frame_index: int) -> bool:
    """Whether the ``frame_index``-th frame since reset (0-based) starts a chunk (of
    :data:`~.contract.FRAMES_PER_CHUNK` frames): the release gives such a frame no
    translation command."""
    return frame_index % FRAMES_PER_CHUNK == 0


def zero_neck_head(frame_75: np.ndarray) -> np.ndarray:
    """A copy of a 75-D frame with the neck, head and hand rotations zeroed (the release's
    physics input, :data:`NECK_HEAD_JOINTS`)."""
    out = np.array(frame_75, dtype=np.float64, copy=True)
    out[..., _NECK_HEAD_COLUMNS] = 0.0
    return out


def release_spawn_frame(release_start_75: np.ndarray, shift_row0_m: np.ndarray) -> np.ndarray:
    """The frame the release places its body at, in this package's world and layout.

    Args:
        release_start_75: the seed's first frame as the release's motion runner places it
            (its motion world: SMPL translation, root axis-angle, 23 joint axis-angles;
            :attr:`humanclaw_gym.motion.paper.PaperMotion.release_start`).
        shift_row0_m: row 0 of the body's ``shift.npy``.

    Returns:
        ``float64 (75,)``: root link position = :data:`ZUP_TO_WORLD` ``@ shift0`` + the
        SMPL translation in this world; root orientation turned into this world; joints as
        given with neck, head and hands zeroed.
    """
    start = np.asarray(release_start_75, dtype=np.float64)
    shift = np.asarray(shift_row0_m, dtype=np.float64)
    if start.shape != (FRAME_DIM,) or not np.all(np.isfinite(start)):
        raise ValueError(f"release_start must be a finite ({FRAME_DIM},) frame")
    if shift.shape != (3,) or not np.all(np.isfinite(shift)):
        raise ValueError("shift.npy row 0 must be 3 finite numbers")
    out = zero_neck_head(start)
    out[0:3] = ZUP_TO_WORLD @ shift + MOTION_TO_WORLD @ start[0:3]
    out[3:6] = rotvec_from_matrix(MOTION_TO_WORLD @ matrix_from_rotvec(start[3:6]))
    return out


def joint_drive(
    real_local: np.ndarray, generated_local: np.ndarray, frame_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """The release's joint drive of one frame.

    Args:
        real_local: ``(J, 4)`` xyzw realized joint rotations (each relative to its parent)
            at the start of the frame.
        generated_local: ``(J, 4)`` the frame's generated joint rotations.
        frame_s: the frame's length (1/30 s).

    Returns:
        ``(velocity, targets)``: ``velocity (J, 3)`` the joint angular velocity written
        before substep 0 (child frame, rad/s): the shortest arc from realized to generated
        over one frame, its norm capped at 30 degrees per frame; ``targets (4, J, 4)`` the
        motor target before each substep ``k``: the realized rotation advanced by ``k / 4``
        of the uncapped shortest arc.
    """
    real = np.asarray(real_local, dtype=np.float64)
    gen = np.asarray(generated_local, dtype=np.float64)
    arc = quat_log(quat_mul(quat_conj(real), gen))  # child frame, shortest arc, uncapped
    velocity = cap_rotvec(arc, MAX_DRIVE_PER_FRAME_RAD) / frame_s
    fractions = np.arange(SUBSTEPS_PER_FRAME, dtype=np.float64) / SUBSTEPS_PER_FRAME
    targets = quat_mul(real[None], quat_exp(arc[None] * fractions[:, None, None]))
    return velocity, targets
