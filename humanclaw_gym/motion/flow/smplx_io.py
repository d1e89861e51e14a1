"""SMPL-X mocap for the learned generator, for users who own the model files.

The body model is :class:`humanclaw_gym.body.smplx_model.SmplxBody` (the user's licensed
SMPL-X files, the ``smplx`` and ``torch`` extras).

* :func:`amass_to_frames`: an AMASS-style SMPL-X clip (``trans``, ``root_orient``,
  ``pose_body`` (63), optional ``betas`` and ``mocap_frame_rate``; Z up) -> 30 fps
  ``(T, 75)`` frames in this package's Y-up world plus ``(T, 24, 3)`` joint centres from the
  real body model.
* :func:`smplx_clip_to_chunks`: the same clip as flow-model training chunks
  (:func:`~humanclaw_gym.motion.flow.dataset.mocap_chunks` with the body model's joints).

Conventions: those of :mod:`humanclaw_gym.body.smplx_model` (the 21 SMPL-X body joints
are the frame's first 21; SMPL's hand joints stay zero). AMASS is Z up; ``_Z_UP_TO_Y_UP``
maps it to Y up (``(x, y, z) -> (x, z, -y)``) for positions and is pre-multiplied onto the
root rotation.
"""

from __future__ import annotations

import os

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM, NUM_JOINTS
from humanclaw_gym.body.smplx_model import SMPLX_BODY_JOINTS, SMPLX_HAND_JOINTS, SmplxBody
from humanclaw_gym.motion.flow.dataset import FPS, ChunkSet, mocap_chunks
from humanclaw_gym.rotations import matrix_from_rotvec, rot_x, rotvec_from_matrix

__all__ = ["amass_to_frames", "smplx_clip_to_chunks"]

_NUM_BODY_JOINTS = SMPLX_BODY_JOINTS
_Z_UP_TO_Y_UP = rot_x(-np.pi / 2.0)


def _resample(
    trans: np.ndarray, rotvecs: np.ndarray, rate_hz: float, fps: float = FPS
) -> tuple[np.ndarray, np.ndarray]:
    """Resample translations (linear) and per-joint rotations (slerp) to ``fps``."""
    from scipy.spatial.transform import Rotation, Slerp

    n = len(trans)
    t_src = np.arange(n) / rate_hz
    t_dst = np.arange(0.0, t_src[-1] + 1e-9, 1.0 / fps)
    if abs(rate_hz - fps) < 1e-9:
        return trans, rotvecs
    out_t = np.stack([np.interp(t_dst, t_src, trans[:, k]) for k in range(3)], axis=1)
    out_r = np.empty((len(t_dst),) + rotvecs.shape[1:])
    for j in range(rotvecs.shape[1]):
        slerp = Slerp(t_src, Rotation.from_rotvec(rotvecs[:, j]))
        out_r[:, j] = slerp(t_dst).as_rotvec()
    return out_t, out_r


def amass_to_frames(
    clip: str | os.PathLike[str] | dict[str, np.ndarray], body: SmplxBody
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert an AMASS-style SMPL-X clip to 30 fps 75-D world frames (Y up).

    Args:
        clip: an ``.npz`` path or a dict with ``trans (T, 3)``, ``root_orient (T, 3)``,
            ``pose_body (T, 63)``, optional ``betas`` and ``mocap_frame_rate`` (or
            ``mocap_framerate``; default 30).
        body: the body model.

    Returns:
        ``(frames (T', 75), joints (T', 24, 3), betas (num_betas,))`` in the Y-up world.
    """
    if isinstance(clip, dict):
        data = {k: np.asarray(v) for k, v in clip.items()}
        name = "clip"
    else:
        with np.load(clip, allow_pickle=False) as f:
            data = {k: np.asarray(f[k]) for k in f.files}
        name = str(clip)
    for key, width in (("trans", 3), ("root_orient", 3), ("pose_body", 63)):
        if key not in data:
            raise ValueError(f"{name}: missing array {key!r} (T, {width}); found {sorted(data)}")
        arr = data[key]
        if arr.ndim != 2 or arr.shape[1] != width:
            raise ValueError(f"{name}: {key} must have shape (T, {width}), got {arr.shape}")
    n = len(data["trans"])
    if len(data["root_orient"]) != n or len(data["pose_body"]) != n or n < 2:
        raise ValueError(f"{name}: trans, root_orient and pose_body must have the same T >= 2")
    rate = float(data.get("mocap_frame_rate", data.get("mocap_framerate", FPS)))
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"{name}: mocap_frame_rate={rate!r} is invalid: allowed > 0")
    betas = np.zeros(body.num_betas)
    if "betas" in data:
        given = np.asarray(data["betas"], dtype=np.float64).reshape(-1)[: body.num_betas]
        betas[: len(given)] = given
    rots = np.concatenate(
        [data["root_orient"][:, None], data["pose_body"].reshape(n, _NUM_BODY_JOINTS, 3)], axis=1
    ).astype(np.float64)
    trans, rots = _resample(data["trans"].astype(np.float64), rots, rate)
    t = len(trans)
    posed = body.run(rots[:, 0], rots[:, 1:].reshape(t, -1), trans, betas)["joints"]
    joints_z = np.concatenate(
        [posed[:, :22], posed[:, list(SMPLX_HAND_JOINTS)]], axis=1
    )  # (T, 24, 3), model frame (Z up)
    joints = joints_z @ _Z_UP_TO_Y_UP.T
    root = rotvec_from_matrix(_Z_UP_TO_Y_UP @ matrix_from_rotvec(rots[:, 0]))
    frames = np.zeros((t, FRAME_DIM))
    frames[:, 0:3] = joints[:, 0]
    frames[:, 3:6] = root
    frames[:, 6 : 6 + 3 * _NUM_BODY_JOINTS] = rots[:, 1:].reshape(t, -1)
    assert joints.shape == (t, NUM_JOINTS, 3)
    return frames, joints, betas


def smplx_clip_to_chunks(
    clip: str | os.PathLike[str] | dict[str, np.ndarray], body: SmplxBody, stride: int = 5
) -> ChunkSet:
    """An SMPL-X clip as flow-model training chunks (joints from the real body model)."""
    frames, joints, _ = amass_to_frames(clip, body)
    return mocap_chunks(frames, stride=stride, joints_world=joints)
