"""A synthetic SMPL-X model file for tests (no licensed data exists in the repository).

:func:`write_synthetic_smplx` writes ``SMPLX_NEUTRAL.npz`` with every array the real
``smplx`` loader reads, in the SMPL-X layout (55 joints), but only 64 vertices: one vertex
on each joint, skinned to that joint alone, plus 9 vertices around the pelvis skinned to
the pelvis. The first 22 joints are this package's rest skeleton, so forward kinematics of
a 75-D frame and the model's posed joints agree. Faces are a strip ``(i, i+1, i+2)`` over
consecutive vertices (31 triangles): thin slivers along the skeleton plus a small crumpled
patch at the pelvis, enough to see in an image.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from humanclaw_gym.body.skeleton import PARENTS, REST_JOINTS_M

__all__ = ["NUM_VERTICES", "SMPLX_PARENTS", "write_synthetic_smplx"]

#: Vertices of the synthetic model.
NUM_VERTICES = 64
_NUM_JOINTS = 55

#: SMPL-X parent of each of the 55 joints: the 22 body joints, jaw and eyes under the
#: head (15), then three joints per finger, five fingers per wrist (20 left, 21 right).
SMPLX_PARENTS: list[int] = list(PARENTS[:22]) + [15, 15, 15]
for _wrist, _first in ((20, 25), (21, 40)):
    for _finger in range(5):
        _base = _first + 3 * _finger
        SMPLX_PARENTS += [_wrist, _base, _base + 1]


def write_synthetic_smplx(
    directory: str | os.PathLike[str],
    pelvis_m: tuple[float, float, float] = (0.0, 0.0, 0.0),
    spread_m: float = 0.2,
) -> Path:
    """Write ``SMPLX_NEUTRAL.npz`` into ``directory`` (atomically) and return its path.

    Args:
        directory: an existing directory.
        pelvis_m: rest pelvis joint ``J0`` in the model frame (metres).
        spread_m: the 9 extra vertices lie uniformly within ``+-spread_m`` of the pelvis.

    Returns:
        The path of the written file.
    """
    rng = np.random.default_rng(0)
    joints = np.zeros((_NUM_JOINTS, 3))
    joints[:22] = REST_JOINTS_M[:22]
    for j in range(22, _NUM_JOINTS):  # jaw/eyes/fingers a few cm from their parents
        joints[j] = joints[SMPLX_PARENTS[j]] + rng.uniform(-0.03, 0.03, 3)
    joints += np.asarray(pelvis_m, dtype=np.float64)
    extra = NUM_VERTICES - _NUM_JOINTS
    verts = np.concatenate([joints, joints[0] + rng.uniform(-spread_m, spread_m, (extra, 3))])
    regressor = np.zeros((_NUM_JOINTS, NUM_VERTICES))
    regressor[np.arange(_NUM_JOINTS), np.arange(_NUM_JOINTS)] = 1.0
    weights = np.zeros((NUM_VERTICES, _NUM_JOINTS))
    weights[np.arange(_NUM_JOINTS), np.arange(_NUM_JOINTS)] = 1.0
    weights[_NUM_JOINTS:, 0] = 1.0
    n_pose = 9 * (_NUM_JOINTS - 1)
    posedirs = np.zeros((NUM_VERTICES, 3, n_pose))
    posedirs[_NUM_JOINTS:] = rng.normal(0, 1e-3, (extra, 3, n_pose))
    faces = np.array([[i, i + 1, i + 2] for i in range(0, NUM_VERTICES - 2, 2)], dtype=np.uint32)
    kintree = np.array([[4294967295] + SMPLX_PARENTS[1:], list(range(_NUM_JOINTS))], dtype=np.int64)
    lmk_faces = rng.integers(0, len(faces), 51)
    bary = rng.uniform(0.1, 1.0, (51, 3))
    path = Path(directory) / "SMPLX_NEUTRAL.npz"
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(
        tmp,
        v_template=verts,
        shapedirs=rng.normal(0, 1e-3, (NUM_VERTICES, 3, 400)),
        posedirs=posedirs,
        J_regressor=regressor,
        weights=weights,
        kintree_table=kintree,
        f=faces,
        hands_componentsl=np.eye(45),
        hands_componentsr=np.eye(45),
        hands_meanl=np.zeros(45),
        hands_meanr=np.zeros(45),
        lmk_faces_idx=lmk_faces,
        lmk_bary_coords=bary / bary.sum(1, keepdims=True),
    )
    os.replace(tmp, path)
    return path
