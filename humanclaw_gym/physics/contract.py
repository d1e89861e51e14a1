"""The half-physics frame contract shared by every physics backend (numbers only).

``docs/physics.md`` states each clause. The backends (:mod:`.pybullet_backend`,
:mod:`.mujoco_backend`) implement these values with their own mechanics and record them,
with their tuning, in ``contract()`` (replay manifests). No simulator is imported here.
"""

from __future__ import annotations

import math

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM, JOINT_NAMES

__all__ = [
    "FRAMES_PER_CHUNK",
    "FRAME_RATE_HZ",
    "GRAVITY_M_S2",
    "HUMAN_FRICTION",
    "MAX_DRIVE_PER_FRAME_RAD",
    "MOTOR_MAX_TORQUE_NM",
    "PJSC_GAINS",
    "REFERENCE_PJSC_GAINS",
    "RESTITUTION",
    "ROOT_ANGULAR_SUBSTEP",
    "ROOT_VELOCITY_SUBSTEPS",
    "SCENE_FRICTION",
    "SUBSTEPS_PER_FRAME",
    "SUBSTEP_S",
    "check_drive_tuning",
    "check_ray_down",
    "validate_frame",
]

#: Rate of generated frames, Hz.
FRAME_RATE_HZ = 30.0
#: Generated frames per skill call (one chunk of 0.5 s); the reference release's first-frame
#: rule (``release_arithmetic``) counts chunks by it.
FRAMES_PER_CHUNK = 15
#: Physics substeps per generated frame.
SUBSTEPS_PER_FRAME = 4
#: Length of one physics substep, seconds (1/120).
SUBSTEP_S = 1.0 / (FRAME_RATE_HZ * SUBSTEPS_PER_FRAME)
#: Zero-based substeps before which the generated root x/z velocity is written.
ROOT_VELOCITY_SUBSTEPS: tuple[int, ...] = (0, 2)
#: Zero-based substep before which the root angular velocity is written (once per frame;
#: it is one of ``ROOT_VELOCITY_SUBSTEPS``: both are written together).
ROOT_ANGULAR_SUBSTEP = 0
#: Magnitude of gravity along world -Y, m/s^2.
GRAVITY_M_S2 = 9.8
#: Cap of every joint drive and of the root angular drive, per generated frame.
MAX_DRIVE_PER_FRAME_RAD = math.radians(30.0)
#: Lateral friction of every humanoid link, the base (pelvis) included.
HUMAN_FRICTION = 0.4
#: Lateral friction of every scene object (the humanoid-vs-object friction is the
#: humanoid's 0.4: Bullet multiplies the two values, MuJoCo gives the humanoid priority).
SCENE_FRICTION = 1.0
#: Restitution of every body.
RESTITUTION = 0.0
#: PJSC gains of the reference contract that differ from its default 1.0 (SMPL "shoulder" =
#: upper-arm joint). Not the backends' default: in them they keep a rotation lost in a contact
#: for seconds (docs/physics.md, "Where this backend differs from the reference contract");
#: pass ``pjsc_gains=REFERENCE_PJSC_GAINS`` to run with them.
REFERENCE_PJSC_GAINS: dict[str, float] = {
    "left_shoulder": 0.03,
    "right_shoulder": 0.03,
    "left_wrist": 0.1,
    "right_wrist": 0.1,
    "left_ankle": 0.1,
    "right_ankle": 0.1,
}
#: The backends' default PJSC gains that differ from 1.0: none (every joint recovers a lost
#: rotation at up to the 30-degree drive cap per frame).
PJSC_GAINS: dict[str, float] = {}

#: Largest torque per axis of each joint's drive (N m): a strong adult's. Legs and spine
#: carry the body (vertical root motion is gravity/contact driven).
MOTOR_MAX_TORQUE_NM: dict[str, float] = {
    "left_hip": 400.0,
    "right_hip": 400.0,
    "spine1": 400.0,
    "left_knee": 400.0,
    "right_knee": 400.0,
    "spine2": 400.0,
    "left_ankle": 250.0,
    "right_ankle": 250.0,
    "spine3": 400.0,
    "left_foot": 60.0,
    "right_foot": 60.0,
    "neck": 80.0,
    "left_collar": 120.0,
    "right_collar": 120.0,
    "head": 60.0,
    "left_shoulder": 120.0,
    "right_shoulder": 120.0,
    "left_elbow": 80.0,
    "right_elbow": 80.0,
    "left_wrist": 30.0,
    "right_wrist": 30.0,
    "left_hand": 15.0,
    "right_hand": 15.0,
}


def validate_frame(frame_75: np.ndarray, where: str) -> np.ndarray:
    """``frame_75`` as a finite ``float64 (75,)`` array, or ValueError naming ``where``."""
    frame = np.asarray(frame_75, dtype=np.float64)
    if frame.shape != (FRAME_DIM,):
        raise ValueError(f"{where}: frame_75 must have shape ({FRAME_DIM},), got {frame.shape}")
    if not np.all(np.isfinite(frame)):
        bad = int(np.flatnonzero(~np.isfinite(frame))[0])
        raise ValueError(f"{where}: frame_75 must be finite, value {bad} is {frame[bad]}")
    return frame


def check_drive_tuning(
    solver_iterations: int,
    root_correction_gain: float,
    motor_torque_scale: float,
    pjsc_gains: dict[str, float] | None,
    joint_names: tuple[str, ...] = JOINT_NAMES[1:],
) -> np.ndarray:
    """Check a physics backend's drive tuning (the constructor options every backend of
    this contract shares) before anything is built.

    Args:
        solver_iterations: constraint solver iterations per substep, an int in [1, 1000].
        root_correction_gain: share of the root drift corrected per frame, in [0, 1].
        motor_torque_scale: factor on :data:`MOTOR_MAX_TORQUE_NM`, > 0.
        pjsc_gains: per-joint PJSC gain overrides (joint name -> gain in [0, 1]) on top of
            :data:`PJSC_GAINS`.
        joint_names: the driven joints, in order (default the skeleton's 23).

    Returns:
        ``float64 (J,)``: the PJSC gain of every joint in ``joint_names`` order.

    Raises:
        TypeError / ValueError: naming the option and its allowed range.
    """
    if isinstance(solver_iterations, bool) or not isinstance(solver_iterations, int):
        raise TypeError(f"solver_iterations must be an int, got {solver_iterations!r}")
    if not 1 <= solver_iterations <= 1000:
        raise ValueError(f"solver_iterations must be in [1, 1000], got {solver_iterations}")
    if not 0.0 <= float(root_correction_gain) <= 1.0:
        raise ValueError(f"root_correction_gain must be in [0, 1], got {root_correction_gain}")
    if not float(motor_torque_scale) > 0.0:
        raise ValueError(f"motor_torque_scale must be > 0, got {motor_torque_scale}")
    gains = dict(PJSC_GAINS)
    for name, gain in (pjsc_gains or {}).items():
        if name not in joint_names:
            raise ValueError(f"pjsc_gains: unknown joint {name!r}; allowed: {joint_names}")
        if not 0.0 <= float(gain) <= 1.0:
            raise ValueError(f"pjsc_gains[{name!r}] must be in [0, 1], got {gain}")
        gains[name] = float(gain)
    return np.array([gains.get(name, 1.0) for name in joint_names])


def check_ray_down(x: float, z: float, from_y: float, to_y: float) -> list[float]:
    """The arguments of a backend's ``ray_cast_down`` as floats ``[x, z, from_y, to_y]``
    (metres, world frame), or ValueError: all finite and ``from_y > to_y``."""
    values = [float(v) for v in (x, z, from_y, to_y)]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"ray_cast_down: x, z, from_y, to_y must be finite, got {values}")
    if not from_y > to_y:
        raise ValueError(f"ray_cast_down: from_y must be > to_y, got from_y={from_y}, to_y={to_y}")
    return values
