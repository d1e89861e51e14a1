"""The humanoid as the renderers draw it: the physics link shapes plus a visual waist.

The physics body (:func:`humanclaw_gym.body.skeleton.link_shapes`) is a chain of simple
primitives; between the pelvis capsule (across the hips, its top about 1 cm above the pelvis
joint) and the lower spine capsule (its bottom about 8 cm above it) it leaves a 7 cm gap,
which a viewer sees as a body cut in two, most of all when it sits and leans. The drawn body
closes it with one extra capsule on the pelvis link, from the pelvis capsule's centre up to
the spine1 joint (whose capsule turns about that joint, so the two stay joined when the
spine bends). It is drawn only: physics, contacts and every metric keep the link shapes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from humanclaw_gym.body.skeleton import JOINT_INDEX, REST_JOINTS_M, LinkShape, link_shapes

__all__ = ["WAIST_RADIUS_M", "drawn_link_shapes"]

#: Radius of the drawn waist capsule (m): a little narrower than the spine capsules above it.
WAIST_RADIUS_M = 0.088


def _quat_z_to(direction: np.ndarray) -> tuple[float, float, float, float]:
    """Quaternion (xyzw) rotating +Z onto ``direction``."""
    d = direction / np.linalg.norm(direction)
    axis = np.cross([0.0, 0.0, 1.0], d)
    s = float(np.linalg.norm(axis))
    angle = float(np.arctan2(s, d[2]))
    if s < 1e-12:
        return (0.0, 0.0, 0.0, 1.0)
    axis = axis / s * np.sin(0.5 * angle)
    return (float(axis[0]), float(axis[1]), float(axis[2]), float(np.cos(0.5 * angle)))


@lru_cache(maxsize=1)
def drawn_link_shapes() -> tuple[LinkShape, ...]:
    """The 24 link shapes followed by the waist capsule (on the pelvis link, joint 0)."""
    shapes = link_shapes()
    pelvis = shapes[0]
    bottom = np.asarray(pelvis.offset_m, dtype=np.float64)  # pelvis capsule centre
    top = REST_JOINTS_M[JOINT_INDEX["spine1"]] - REST_JOINTS_M[0]
    seg = top - bottom
    length = float(np.linalg.norm(seg))
    waist = LinkShape(
        joint=0,
        kind="capsule",
        radius=WAIST_RADIUS_M,
        half_length=max(0.5 * length - WAIST_RADIUS_M, 0.005),
        half_extents=(0.0, 0.0, 0.0),
        offset_m=tuple(float(v) for v in 0.5 * (top + bottom)),  # type: ignore[arg-type]
        quat_xyzw=_quat_z_to(seg),
        mass_kg=0.0,
    )
    return (*shapes, waist)
