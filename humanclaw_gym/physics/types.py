"""Plain data exchanged between the physics backend and its consumers (metrics, recorders).

No simulator import here: these types are what metric code sees of physics.

Contacts are a numpy structured array with :data:`CONTACT_DTYPE`, one row per contact
point, in the Y-up world frame:

==========  =======  ==========================================================
field       dtype    meaning
==========  =======  ==========================================================
a           int32    id of the first body: :data:`HUMAN_ID` (0) for the humanoid,
                     else a scene ``object_id`` (>= 1)
link_a      int32    humanoid joint/link index 0..23 when ``a`` is the humanoid,
                     else the object's part index (-1 when not asked for)
b           int32    id of the second body (never the humanoid; rows with the
                     humanoid always put it in ``a``; object-object rows have a < b)
link_b      int32    part index of ``b`` (-1 when not asked for)
pos_a       f8 (3,)  contact point on ``a``, world, metres
pos_b       f8 (3,)  contact point on ``b``, world, metres
distance    float64  signed contact distance, metres (negative = penetration)
==========  =======  ==========================================================

The objects' part indices cost pybullet a nearest-part search per row, so a query
computes them only when asked (``contacts(parts=True)``); otherwise the object ``link``
fields read -1 and every other field is the same.

:class:`FrameStates` is what :meth:`~humanclaw_gym.physics.base.HalfPhysicsBase.
record_frames` hands back: the state after each frame of a chunk, read while it ran.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CONTACT_DTYPE", "HUMAN_ID", "FrameStates", "empty_contacts"]

#: Id of the humanoid in contact rows and instance (semantic) images.
HUMAN_ID = 0

CONTACT_DTYPE = np.dtype(
    [
        ("a", np.int32),
        ("link_a", np.int32),
        ("b", np.int32),
        ("link_b", np.int32),
        ("pos_a", np.float64, (3,)),
        ("pos_b", np.float64, (3,)),
        ("distance", np.float64),
    ]
)


def empty_contacts() -> np.ndarray:
    """An empty contact array with :data:`CONTACT_DTYPE`."""
    return np.zeros(0, dtype=CONTACT_DTYPE)


@dataclass(frozen=True, eq=False)
class FrameStates:
    """The simulated state after each executed frame of a chunk, in frame order.

    ``k`` frames completed (all of them unless ``error`` stopped the chunk). The arrays are
    read-only.

    Attributes:
        realized: ``float64 (k, 75)`` the realized pose after each frame.
        object_poses: ``float64 (k, M, 7)`` the dynamic objects' world poses after each
            frame (rows of ``dynamic_object_ids``).
        contacts: ``k`` arrays of :data:`CONTACT_DTYPE` rows, the contact query of the
            state after each frame; None when not asked for.
        error: the exception raised by frame ``k`` (e.g. the simulation diverged); the
            frames after it did not run. None when every frame ran.
    """

    realized: np.ndarray
    object_poses: np.ndarray
    contacts: tuple[np.ndarray, ...] | None
    error: Exception | None = None

    def __len__(self) -> int:
        return len(self.realized)
