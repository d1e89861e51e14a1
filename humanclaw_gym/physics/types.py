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
                     else the object's part index (-1 when unknown)
b           int32    id of the second body (never the humanoid; rows with the
                     humanoid always put it in ``a``; object-object rows have a < b)
link_b      int32    part index of ``b`` (-1 when unknown)
pos_a       f8 (3,)  contact point on ``a``, world, metres
pos_b       f8 (3,)  contact point on ``b``, world, metres
distance    float64  signed contact distance, metres (negative = penetration)
==========  =======  ==========================================================
"""

from __future__ import annotations

import numpy as np

__all__ = ["CONTACT_DTYPE", "HUMAN_ID", "empty_contacts"]

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
