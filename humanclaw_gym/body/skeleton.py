"""The 24-joint SMPL-style skeleton, the 75-D frame layout and forward kinematics.

Conventions (the public contract every other module relies on):

* World frame: Y up, metres, radians. The body's own frame at rest: +Y up, +Z forward
  (the direction the face and toes point), +X to the body's left.
* A *frame* is a ``float64 (75,)`` vector: ``[0:3]`` world position of the pelvis joint,
  ``[3:6]`` global orientation of the pelvis as an axis-angle vector (body frame -> world),
  ``[6:75]`` the 23 non-root joints (``JOINT_NAMES[1:]``, in order) as axis-angle rotations
  relative to their parent. A sequence of frames is ``(T, 75)``.
* Rest pose: all rotations zero, joint centres at ``REST_JOINTS_M`` (pelvis-relative).
  The first 22 come from the neutral SMPL body (``assets/smpl_neutral_body22.json``); the two
  hand joints extend the wrists by ``_HAND_OFFSET_M``. The rest pose is a T-pose (arms out).
* Yaw: rotation about world +Y. A body with yaw ``psi`` faces ``(sin psi, 0, cos psi)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = [
    "BODY_GROUPS",
    "FRAME_DIM",
    "JOINT_INDEX",
    "JOINT_NAMES",
    "NUM_JOINTS",
    "PARENTS",
    "REST_JOINTS_M",
    "forward_kinematics",
    "frame_from_parts",
    "heading_yaw",
    "joint_body_group",
    "neutral_body22_m",
    "split_frame",
]

JOINT_NAMES: tuple[str, ...] = (
    "pelvis",
    "left_hip",
    "right_hip",
    "spine1",
    "left_knee",
    "right_knee",
    "spine2",
    "left_ankle",
    "right_ankle",
    "spine3",
    "left_foot",
    "right_foot",
    "neck",
    "left_collar",
    "right_collar",
    "head",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hand",
    "right_hand",
)
NUM_JOINTS = len(JOINT_NAMES)
JOINT_INDEX: dict[str, int] = {name: i for i, name in enumerate(JOINT_NAMES)}
PARENTS: tuple[int, ...] = (
    -1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 20, 21,
)  # fmt: skip
FRAME_DIM = 75

_HAND_OFFSET_M = 0.085

#: Body groups used by the collision metric ("arm/hand", "torso", "leg/foot", "head").
BODY_GROUPS: dict[str, tuple[str, ...]] = {
    "arm/hand": (
        "left_shoulder",
        "right_shoulder",
        "left_elbow",
        "right_elbow",
        "left_wrist",
        "right_wrist",
        "left_hand",
        "right_hand",
    ),
    "torso": ("pelvis", "spine1", "spine2", "spine3", "left_collar", "right_collar"),
    "leg/foot": (
        "left_hip",
        "right_hip",
        "left_knee",
        "right_knee",
        "left_ankle",
        "right_ankle",
        "left_foot",
        "right_foot",
    ),
    "head": ("neck", "head"),
}


def joint_body_group(joint: int | str) -> str:
    """Return the collision body group of a joint (by index or name)."""
    name = JOINT_NAMES[joint] if isinstance(joint, (int, np.integer)) else joint
    for group, names in BODY_GROUPS.items():
        if name in names:
            return group
    raise KeyError(f"unknown joint {joint!r}; expected one of {JOINT_NAMES}")


@lru_cache(maxsize=1)
def neutral_body22_m() -> np.ndarray:
    """Pelvis-relative neutral SMPL joint centres of the first 22 joints, ``float64 (22, 3)``."""
    text = resources.files("humanclaw_gym.assets").joinpath("smpl_neutral_body22.json").read_text()
    data = json.loads(text)
    names = tuple(data["joint_names"])
    if names != JOINT_NAMES[:22]:
        raise ValueError("smpl_neutral_body22.json joint order does not match JOINT_NAMES")
    positions = np.asarray(data["positions_m"], dtype=np.float64)
    if positions.shape != (22, 3):
        raise ValueError(f"smpl_neutral_body22.json positions_m has shape {positions.shape}")
    positions.setflags(write=False)
    return positions


def _rest_joints() -> np.ndarray:
    body22 = neutral_body22_m()
    rest = np.zeros((NUM_JOINTS, 3))
    rest[:22] = body22
    rest[22] = body22[20] + np.array([_HAND_OFFSET_M, -0.01, -0.01])
    rest[23] = body22[21] + np.array([-_HAND_OFFSET_M, -0.01, -0.01])
    rest.setflags(write=False)
    return rest


#: Rest joint centres relative to the pelvis, ``float64 (24, 3)``, body frame.
REST_JOINTS_M: np.ndarray = _rest_joints()


def split_frame(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split ``(..., 75)`` frames into root position ``(..., 3)``, root axis-angle ``(..., 3)``
    and joint axis-angles ``(..., 23, 3)``."""
    frames = np.asarray(frames, dtype=np.float64)
    if frames.shape[-1] != FRAME_DIM:
        raise ValueError(f"frame must have {FRAME_DIM} values in its last axis, got {frames.shape}")
    return frames[..., 0:3], frames[..., 3:6], frames[..., 6:].reshape(*frames.shape[:-1], 23, 3)


def frame_from_parts(root_pos: np.ndarray, root_aa: np.ndarray, joint_aa: np.ndarray) -> np.ndarray:
    """Inverse of :func:`split_frame`: assemble ``(..., 75)`` frames."""
    root_pos = np.asarray(root_pos, dtype=np.float64)
    root_aa = np.asarray(root_aa, dtype=np.float64)
    joint_aa = np.asarray(joint_aa, dtype=np.float64)
    lead = root_pos.shape[:-1]
    return np.concatenate([root_pos, root_aa, joint_aa.reshape(*lead, 69)], axis=-1)


def _aa_to_matrix(aa: np.ndarray) -> np.ndarray:
    """Rodrigues: axis-angle ``(..., 3)`` -> rotation matrices ``(..., 3, 3)``."""
    aa = np.asarray(aa, dtype=np.float64)
    theta = np.linalg.norm(aa, axis=-1, keepdims=True)
    small = theta < 1e-12
    axis = np.where(small, np.array([1.0, 0.0, 0.0]), aa / np.where(small, 1.0, theta))
    x, y, z = axis[..., 0], axis[..., 1], axis[..., 2]
    t = theta[..., 0]
    c, s = np.cos(t), np.sin(t)
    C = 1.0 - c
    m = np.empty(aa.shape[:-1] + (3, 3))
    m[..., 0, 0] = c + x * x * C
    m[..., 0, 1] = x * y * C - z * s
    m[..., 0, 2] = x * z * C + y * s
    m[..., 1, 0] = y * x * C + z * s
    m[..., 1, 1] = c + y * y * C
    m[..., 1, 2] = y * z * C - x * s
    m[..., 2, 0] = z * x * C - y * s
    m[..., 2, 1] = z * y * C + x * s
    m[..., 2, 2] = c + z * z * C
    return m


def forward_kinematics(
    frames: np.ndarray, rest_joints_m: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """World joint positions and global joint rotations for ``(..., 75)`` frames.

    Args:
        frames: ``(..., 75)`` frames.
        rest_joints_m: ``(24, 3)`` pelvis-relative rest joint centres of the posed body
            (default :data:`REST_JOINTS_M`; another body's, e.g. a body asset's, see
            :class:`humanclaw_gym.motion.bodyfit.MotionBody`).

    Returns:
        positions: ``float64 (..., 24, 3)`` world joint centres (index 0 = pelvis = root position).
        rotations: ``float64 (..., 24, 3, 3)`` global rotation of each joint's frame
            (body-frame rest axes -> world).
    """
    rest = REST_JOINTS_M if rest_joints_m is None else rest_joints_m
    root_pos, root_aa, joint_aa = split_frame(frames)
    local = np.concatenate([root_aa[..., None, :], joint_aa], axis=-2)  # (..., 24, 3)
    local_m = _aa_to_matrix(local)
    lead = root_pos.shape[:-1]
    rot = np.empty(lead + (NUM_JOINTS, 3, 3))
    pos = np.empty(lead + (NUM_JOINTS, 3))
    rot[..., 0, :, :] = local_m[..., 0, :, :]
    pos[..., 0, :] = root_pos
    for j in range(1, NUM_JOINTS):
        p = PARENTS[j]
        rot[..., j, :, :] = rot[..., p, :, :] @ local_m[..., j, :, :]
        bone = rest[j] - rest[p]
        pos[..., j, :] = pos[..., p, :] + np.einsum("...ab,b->...a", rot[..., p, :, :], bone)
    return pos, rot


def heading_yaw(root_aa: np.ndarray) -> np.ndarray:
    """Yaw (rad) of the body's forward axis (+Z body) projected on the floor, ``(...,)``."""
    m = _aa_to_matrix(np.asarray(root_aa, dtype=np.float64))
    forward = m[..., :, 2]
    return np.arctan2(forward[..., 0], forward[..., 2])


@dataclass(frozen=True)
class LinkShape:
    """Collision and visual primitive of one link, in that link's frame.

    The link frame of joint ``j`` has its origin at the joint centre and the joint's global
    rotation (identity at rest, i.e. body-frame axes). ``kind`` is ``"capsule"`` (axis along
    the shape's local +Z, ``radius`` and ``half_length`` of the cylindrical part),
    ``"box"`` (``half_extents``) or ``"sphere"`` (``radius``). ``offset_m`` and
    ``quat_xyzw`` place the shape in the link frame.
    """

    joint: int
    kind: str
    radius: float
    half_length: float
    half_extents: tuple[float, float, float]
    offset_m: tuple[float, float, float]
    quat_xyzw: tuple[float, float, float, float]
    mass_kg: float


def _quat_z_to(direction: np.ndarray) -> tuple[float, float, float, float]:
    """Quaternion (xyzw) rotating +Z onto ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    d = d / np.linalg.norm(d)
    z = np.array([0.0, 0.0, 1.0])
    c = float(np.dot(z, d))
    if c > 1.0 - 1e-12:
        return (0.0, 0.0, 0.0, 1.0)
    if c < -1.0 + 1e-12:
        return (1.0, 0.0, 0.0, 0.0)
    axis = np.cross(z, d)
    axis /= np.linalg.norm(axis)
    half = 0.5 * np.arccos(np.clip(c, -1.0, 1.0))
    s = np.sin(half)
    return (float(axis[0] * s), float(axis[1] * s), float(axis[2] * s), float(np.cos(half)))


# (joint, child-or-target, radius, mass) for bone capsules; target may be a point offset.
_BONE_CAPSULES: tuple[tuple[str, str, float, float], ...] = (
    ("left_hip", "left_knee", 0.06, 8.0),
    ("right_hip", "right_knee", 0.06, 8.0),
    ("left_knee", "left_ankle", 0.048, 3.6),
    ("right_knee", "right_ankle", 0.048, 3.6),
    ("spine1", "spine2", 0.095, 5.0),
    ("spine2", "spine3", 0.105, 6.0),
    ("neck", "head", 0.05, 1.0),
    ("left_collar", "left_shoulder", 0.05, 1.0),
    ("right_collar", "right_shoulder", 0.05, 1.0),
    ("left_shoulder", "left_elbow", 0.046, 2.0),
    ("right_shoulder", "right_elbow", 0.046, 2.0),
    ("left_elbow", "left_wrist", 0.038, 1.2),
    ("right_elbow", "right_wrist", 0.038, 1.2),
    ("left_wrist", "left_hand", 0.034, 0.4),
    ("right_wrist", "right_hand", 0.034, 0.4),
)

#: Height of the sole below the lower ankle joint centre in the rest pose (m).
_SOLE_BELOW_ANKLE_M = 0.085
#: Pelvis-relative height of both soles at rest (the two SMPL ankles differ by 7 mm).
_SOLE_Y_M = float(
    min(REST_JOINTS_M[JOINT_INDEX["left_ankle"]][1], REST_JOINTS_M[JOINT_INDEX["right_ankle"]][1])
    - _SOLE_BELOW_ANKLE_M
)


@lru_cache(maxsize=1)
def link_shapes() -> tuple[LinkShape, ...]:
    """One primitive per joint (24 links), sized to a neutral adult (72.5 kg with the
    heavier end links, see below).

    Capsules along each limb bone, a box per foot (heel to toes, sole flat at rest),
    a wide capsule for the pelvis and the chest, a sphere for the head and the fingers.
    """
    rest = REST_JOINTS_M
    shapes: list[LinkShape] = []
    ident = (0.0, 0.0, 0.0, 1.0)
    by_joint: dict[int, LinkShape] = {}

    def capsule(joint: int, a: np.ndarray, b: np.ndarray, radius: float, mass: float) -> LinkShape:
        seg = b - a
        length = float(np.linalg.norm(seg))
        half = max(0.5 * length - radius, 0.005)
        center = 0.5 * (a + b) - rest[joint]
        return LinkShape(joint, "capsule", radius, half, (0.0, 0.0, 0.0),
                         tuple(float(v) for v in center), _quat_z_to(seg), mass)  # fmt: skip

    for name, target, radius, mass in _BONE_CAPSULES:
        j, t = JOINT_INDEX[name], JOINT_INDEX[target]
        by_joint[j] = capsule(j, rest[j], rest[t], radius, mass)
    # pelvis: a wide capsule across the hips, centred at hip-joint height so that its
    # lowest point (the sitting bones) is ~0.19 m below the pelvis joint, lower than the
    # thighs of a seated body even on seats at knee height: a seated body rests on its
    # pelvis (the Interact metric needs pelvis-seat contact).
    lh, rh = rest[JOINT_INDEX["left_hip"]], rest[JOINT_INDEX["right_hip"]]
    lift = np.array([0.0, 0.0, -0.01])
    by_joint[0] = capsule(0, rh + lift - [0.03, 0, 0], lh + lift + [0.03, 0, 0], 0.1, 11.0)
    # chest (spine3): wide capsule between the collars' roots.
    s3 = rest[JOINT_INDEX["spine3"]]
    by_joint[JOINT_INDEX["spine3"]] = capsule(
        JOINT_INDEX["spine3"], s3 + [-0.085, 0.07, 0.0], s3 + [0.085, 0.07, 0.0], 0.11, 9.0
    )
    # head: sphere above the head joint.
    by_joint[JOINT_INDEX["head"]] = LinkShape(
        JOINT_INDEX["head"], "sphere", 0.1, 0.0, (0.0, 0.0, 0.0), (0.0, 0.06, 0.02), ident, 4.5
    )
    # feet: ankle link = box from heel to ball, sole flat; foot link = toes box.
    # The end links (toes here, fingers below) are heavier than anatomical shares of the
    # body mass: at 0.2 kg Bullet's iterative solver, holding a light link between a floor
    # contact and a 64 kg body, left a toe twisted 30-43 degrees off its command for frames
    # (docs/physics.md, "Light end links").
    for side in ("left", "right"):
        ankle, foot = JOINT_INDEX[f"{side}_ankle"], JOINT_INDEX[f"{side}_foot"]
        a, f = rest[ankle], rest[foot]
        sole_y = _SOLE_Y_M  # both soles on one plane at rest
        heel_z, ball_z = a[2] - 0.06, f[2]
        hy = 0.5 * (a[1] - 0.01 - sole_y)
        center = np.array([0.5 * (a[0] + f[0]), sole_y + hy, 0.5 * (heel_z + ball_z)]) - a
        by_joint[ankle] = LinkShape(ankle, "box", 0.0, 0.0, (0.045, float(hy), float(0.5 * (ball_z - heel_z))),
                                    tuple(float(v) for v in center), ident, 1.0)  # fmt: skip
        toe_h = 0.022
        toe_center = np.array([f[0], sole_y + toe_h, f[2] + 0.035]) - f
        by_joint[foot] = LinkShape(foot, "box", 0.0, 0.0, (0.043, toe_h, 0.035),
                                   tuple(float(v) for v in toe_center), ident, 0.5)  # fmt: skip
    # fingers: small spheres beyond the hand joints (0.3 kg: see the toes above).
    for side, sign in (("left", 1.0), ("right", -1.0)):
        h = JOINT_INDEX[f"{side}_hand"]
        by_joint[h] = LinkShape(h, "sphere", 0.035, 0.0, (0.0, 0.0, 0.0),
                                (sign * 0.03, 0.0, 0.0), ident, 0.3)  # fmt: skip
    for j in range(NUM_JOINTS):
        shapes.append(by_joint[j])
    return tuple(shapes)


#: Pelvis height above a flat floor when standing in the rest pose (sole on the floor), m.
STANDING_PELVIS_HEIGHT_M: float = -_SOLE_Y_M

#: Distance from the pelvis joint down to the lowest point of the pelvis shape (m): a body
#: seated on a surface at height h has its pelvis joint at about h + this.
PELVIS_SEAT_OFFSET_M: float = 0.0

#: Eye (ego camera) position in the head joint's frame, metres: slightly up and forward.
EYE_OFFSET_IN_HEAD_M: tuple[float, float, float] = (0.0, 0.07, 0.11)


def _pelvis_seat_offset() -> float:
    shape = link_shapes()[0]
    return float(-(shape.offset_m[1] - shape.radius))


PELVIS_SEAT_OFFSET_M = _pelvis_seat_offset()
