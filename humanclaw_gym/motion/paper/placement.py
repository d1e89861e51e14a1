"""Where the paper's canonical chunks sit in the world, chunk after chunk (torch, float32).

The release's model state (219-D per frame) is ``[SMPL translation (3), root axis-angle
(3), 23 joint axis-angles (69), 24 joint positions (72), 24 joint velocities (72)]`` in a
*canonical frame*: floor-projected (the floor at ``y = 0``) and turned so that the body of
a reference frame faces ``+Z``, its hips along ``X``. A placement ``T`` (4 x 4, float32)
maps that frame into the release's motion world, plus a floor height ``floor_y``:

* :func:`to_world`: a generated chunk's translations, orientations and joint positions in
  the world (translation and joints: ``T (p + floor_y e_y)``; orientations: ``R_T R``);
* :func:`next_history`: the last five world frames re-canonicalised about the last of
  them: the new ``T`` is that frame's floor projection (translation x/z, heading from the
  left-minus-right hip direction), the new ``floor_y`` the lowest of its joints; joint
  velocities are turned by the change of heading.

These follow the release's arithmetic operation for operation (Rodrigues' formula with its
``1e-8`` guards, the ``acos`` logarithm, homogeneous products), because a chunk is fed back
as the next history: identical operations keep this package's chunks equal to the release's
to the last bit on the same device and thread count, where a mathematically equal but
differently rounded formula would drift. The translation is treated as a point, as in the
release (see docs/motion.md, "The paper's motion model").
"""

from __future__ import annotations

import torch

__all__ = [
    "JOINTS",
    "STATE_DIM",
    "axis_angle_matrix",
    "matrix_axis_angle",
    "next_history",
    "to_world",
    "zero_neck_head",
]

STATE_DIM = 219
JOINTS = 24
_POS = slice(75, 147)
_VEL = slice(147, 219)
# the 69-D joint rotations of the neck (joint 12) and head (joint 15), which the release
# zeroes in everything it generates
_NECK_HEAD = (slice(33, 36), slice(42, 45))


def zero_neck_head(body_pose: torch.Tensor) -> torch.Tensor:
    """A copy of ``(..., 69)`` joint rotations with neck and head set to zero."""
    out = body_pose.clone()
    for part in _NECK_HEAD:
        out[..., part] = 0
    return out


def axis_angle_matrix(aa: torch.Tensor) -> torch.Tensor:
    """``(..., 3)`` axis-angles -> ``(..., 3, 3)`` rotation matrices (Rodrigues)."""
    angle = torch.norm(aa, dim=-1, keepdim=True)
    axis = aa / (angle + 1e-8)
    cos = torch.cos(angle).unsqueeze(-1)
    sin = torch.sin(angle).unsqueeze(-1)
    x, y, z = axis[..., 0], axis[..., 1], axis[..., 2]
    o = torch.zeros_like(x)
    skew = torch.stack(
        [
            torch.stack([o, -z, y], dim=-1),
            torch.stack([z, o, -x], dim=-1),
            torch.stack([-y, x, o], dim=-1),
        ],
        dim=-2,
    )
    eye = torch.eye(3, device=aa.device, dtype=aa.dtype).expand_as(skew)
    out = eye + sin * skew + (1 - cos) * (skew @ skew)
    tiny = angle.squeeze(-1) < 1e-6
    if tiny.any():
        out[tiny] = torch.eye(3, device=aa.device, dtype=aa.dtype)
    return out


def matrix_axis_angle(m: torch.Tensor) -> torch.Tensor:
    """``(..., 3, 3)`` rotation matrices -> ``(..., 3)`` axis-angles (angle from the trace,
    axis from the skew part)."""
    cos = torch.clamp((m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2] - 1) / 2, -1, 1)
    angle = torch.acos(cos)
    axis = torch.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]],
        dim=-1,
    )
    axis = axis / (torch.norm(axis, dim=-1, keepdim=True) + 1e-8)
    out = axis * angle.unsqueeze(-1)
    tiny = angle < 1e-6
    if tiny.any():
        out[tiny] = torch.zeros(3, device=m.device, dtype=m.dtype)
    return out


def _apply_homogeneous(T: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    h = torch.cat([points, torch.ones_like(points[..., :1])], dim=-1)
    return (T[None, None] @ h[..., None]).squeeze(-1)[..., :3]


def to_world(
    states: torch.Tensor, T: torch.Tensor, floor_y: float | torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A canonical ``(F, 219)`` chunk in the world of placement ``T`` and ``floor_y``.

    Returns:
        ``(translation (F, 3), orientation (F, 3), body pose (F, 69) with neck and head
        zeroed, joint positions (F, 24, 3))``, float32 world values.
    """
    transl = states[..., :3].clone()
    transl[:, 1] += floor_y
    rotation = T[:3, :3]
    transl_w = (rotation @ transl.unsqueeze(-1)).squeeze(-1) + T[:3, 3]
    orient_w = matrix_axis_angle(rotation.unsqueeze(0) @ axis_angle_matrix(states[..., 3:6]))
    joints = states[..., _POS].reshape(*states.shape[:-1], JOINTS, 3).clone()
    joints[..., 1] += floor_y
    return transl_w, orient_w, zero_neck_head(states[..., 6:75]), _apply_homogeneous(T, joints)


def _floor_transform(transl: torch.Tensor, joints: torch.Tensor) -> torch.Tensor:
    """Per frame: the floor-projected 4 x 4 pose (x/z translation, heading from the hips)."""
    across = joints[:, 1, :] - joints[:, 2, :]  # left hip - right hip
    across[:, 1] = 0
    across = across / (torch.norm(across, dim=-1, keepdim=True) + 1e-8)
    up = torch.zeros_like(across)
    up[:, 1] = 1
    forward = torch.cross(across, up, dim=-1)
    forward = forward / (torch.norm(forward, dim=-1, keepdim=True) + 1e-8)
    ground = transl.clone()
    ground[:, 1] = 0
    T = torch.zeros(transl.shape[0], 4, 4, device=transl.device, dtype=transl.dtype)
    T[:, :3, :3] = torch.stack([across, up, forward], dim=-1)
    T[:, :3, 3] = ground
    T[:, 3, 3] = 1.0
    return T


def _rigid_inverse(T: torch.Tensor) -> torch.Tensor:
    R_t = T[..., :3, :3].transpose(-1, -2)
    out = torch.zeros_like(T)
    out[..., :3, :3] = R_t
    out[..., :3, 3] = -(R_t @ T[..., :3, 3].unsqueeze(-1)).squeeze(-1)
    out[..., 3, 3] = 1.0
    return out


def next_history(
    transl_w: torch.Tensor,
    orient_w: torch.Tensor,
    body_pose: torch.Tensor,
    joints_w: torch.Tensor,
    velocities: torch.Tensor,
    T_old: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Re-canonicalise the last frames of a chunk about the last of them.

    Args:
        transl_w, orient_w, body_pose, joints_w: the frames' world values (from
            :func:`to_world`), ``(H, ...)``.
        velocities: their ``(H, 72)`` joint velocities in the old canonical frame.
        T_old: the placement the chunk was generated in.

    Returns:
        ``(history (H, 219), new placement T (4, 4), new floor_y (0-d tensor))``.
    """
    frames = transl_w.shape[0]
    ref = frames - 1
    poses = _floor_transform(transl_w, joints_w)
    inverse = _rigid_inverse(poses[ref].unsqueeze(0))[0]
    r_inv = inverse[:3, :3]
    orient = matrix_axis_angle(r_inv.unsqueeze(0) @ axis_angle_matrix(orient_w))
    transl = (r_inv @ (transl_w - poses[ref, :3, 3]).unsqueeze(-1)).squeeze(-1)
    joints = _apply_homogeneous(inverse, joints_w)
    floor_y = joints[ref, :, 1].min()
    transl[:, 1] -= floor_y
    joints[..., 1] -= floor_y
    turn = r_inv @ T_old[:3, :3]
    vel = (turn[None, None] @ velocities.reshape(frames, JOINTS, 3)[..., None]).squeeze(-1)
    state = torch.cat(
        [
            transl,
            orient,
            body_pose,
            joints.reshape(frames, 3 * JOINTS),
            vel.reshape(frames, 3 * JOINTS),
        ],
        dim=-1,
    )
    return state, poses[ref], floor_y
