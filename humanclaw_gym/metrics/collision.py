"""Fixed-geometry collision, the episode floor and the initial penetration diagnostic.

All three read the same per-frame contact rows (:data:`~humanclaw_gym.physics.types.
CONTACT_DTYPE`) that the physics backend produces for the realized, post-physics pose at
30 Hz; nothing is re-simulated or interpolated.

* The *floor* of an episode is measured once at spawn: of the surfaces hit by a downward
  ray, the highest one that is not above the standing body's lowest point + 5 cm.
* A *collision contact* is a humanoid contact with a non-dynamic scene object whose contact
  point on the object lies more than 0.0205 m above that floor (so standing, stepping and
  shuffling on the floor never count, climbing onto a stair or bumping into furniture does).
* A motion decision step *collides* when any of its frames has a collision contact.
  ``collision_rate = colliding motion steps / motion steps``; the same step sets are kept
  per body group (arm/hand, torso, leg/foot, head) of the touching humanoid link.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from humanclaw_gym.body.skeleton import BODY_GROUPS, NUM_JOINTS, joint_body_group
from humanclaw_gym.metrics._checks import (
    as_contacts,
    as_finite_float,
    as_id_set,
    as_int,
    check_human_links,
)
from humanclaw_gym.metrics.thresholds import COLLISION_MIN_HEIGHT_M, FLOOR_SELECT_EPSILON_M
from humanclaw_gym.physics.types import HUMAN_ID

__all__ = [
    "CollisionTracker",
    "collision_contact_mask",
    "initial_penetration",
    "is_collision_contact",
    "spawn_floor_height",
]


def collision_contact_mask(
    contacts: np.ndarray,
    dynamic_ids: Iterable[int],
    floor_height_m: float,
    min_height_m: float = COLLISION_MIN_HEIGHT_M,
) -> np.ndarray:
    """Which contact rows are fixed-geometry collisions.

    A row qualifies when the humanoid is body ``a``, body ``b`` is a scene object (id >= 1)
    that is not dynamic, and ``pos_b[1] - floor_height_m > min_height_m`` (the height of
    the contact point on the object above the floor, metres).

    Args:
        contacts: ``CONTACT_DTYPE (N,)`` rows of one frame.
        dynamic_ids: ids of the scene's movable (dynamic) objects.
        floor_height_m: the episode floor (world y, metres), see :func:`spawn_floor_height`.
        min_height_m: height threshold above the floor (m).

    Returns:
        ``bool (N,)``.
    """
    rows = as_contacts(contacts)
    floor = as_finite_float(floor_height_m, "floor_height_m")
    dynamic = np.fromiter(as_id_set(dynamic_ids, "dynamic_ids"), dtype=np.int64)
    if rows.size == 0:
        return np.zeros(0, dtype=bool)
    human = rows["a"] == HUMAN_ID
    fixed = (rows["b"] >= 1) & ~np.isin(rows["b"], dynamic)
    high = (rows["pos_b"][:, 1] - floor) > float(min_height_m)
    return human & fixed & high


def is_collision_contact(
    contact: np.void | np.ndarray,
    dynamic_ids: Iterable[int],
    floor_height_m: float,
    min_height_m: float = COLLISION_MIN_HEIGHT_M,
) -> bool:
    """Whether one contact row is a fixed-geometry collision (see :func:`collision_contact_mask`)."""
    return bool(
        collision_contact_mask(
            np.asarray(contact).reshape(1), dynamic_ids, floor_height_m, min_height_m
        )[0]
    )


def spawn_floor_height(
    hit_heights: Sequence[float],
    body_lowest_y: float,
    epsilon_m: float = FLOOR_SELECT_EPSILON_M,
) -> float:
    """The episode floor: the highest downward-ray hit not above ``body_lowest_y + epsilon_m``.

    Args:
        hit_heights: world y (m) of every surface hit by a downward ray cast at the spawn
            position (humanoid hits excluded by the caller).
        body_lowest_y: world y (m) of the standing body's lowest point at spawn.
        epsilon_m: tolerance above the lowest body point (m).

    Returns:
        The floor height, world y in metres.

    Raises:
        ValueError: when no hit qualifies (the ray found no floor under the body).
    """
    lowest = as_finite_float(body_lowest_y, "body_lowest_y")
    limit = lowest + float(epsilon_m)
    heights = [as_finite_float(h, f"hit_heights[{i}]") for i, h in enumerate(hit_heights)]
    eligible = [h for h in heights if h <= limit]
    if not eligible:
        raise ValueError(
            f"no floor under the spawn: none of the {len(heights)} ray hits {heights} is at or "
            f"below body_lowest_y + {epsilon_m} = {limit}"
        )
    return max(eligible)


def initial_penetration(contacts: np.ndarray) -> float:
    """Deepest penetration (m, >= 0) among the humanoid's contacts of one query.

    Args:
        contacts: ``CONTACT_DTYPE`` rows of the reset-time contact query (before any
            physics frame).

    Returns:
        ``max(0, -min(distance))`` over rows whose ``a`` is the humanoid; 0 when none.
    """
    rows = as_contacts(contacts)
    human = rows[rows["a"] == HUMAN_ID]
    if human.size == 0:
        return 0.0
    return float(max(0.0, -float(np.min(human["distance"]))))


class CollisionTracker:
    """Online collision step sets of one episode.

    Args:
        dynamic_ids: ids of the movable objects (never collisions; they are disturbance).
        floor_height_m: the episode floor, world y in metres.
    """

    def __init__(self, dynamic_ids: Iterable[int], floor_height_m: float) -> None:
        self._dynamic_ids = as_id_set(dynamic_ids, "dynamic_ids")
        self.floor_height_m = as_finite_float(floor_height_m, "floor_height_m")
        self._motion_steps: set[int] = set()
        self._collision_steps: set[int] = set()
        self._group_steps: dict[str, set[int]] = {group: set() for group in BODY_GROUPS}

    def record_frame(self, step: int, contacts: np.ndarray) -> bool:
        """Record one realized frame of motion decision ``step``.

        Returns:
            ``True`` when the frame has at least one collision contact.
        """
        step = as_int(step, "step", 0)
        rows = as_contacts(contacts)
        check_human_links(rows, NUM_JOINTS)
        self._motion_steps.add(step)
        hits = rows[collision_contact_mask(rows, self._dynamic_ids, self.floor_height_m)]
        for link in hits["link_a"]:
            self._group_steps[joint_body_group(int(link))].add(step)
        if hits.size:
            self._collision_steps.add(step)
        return bool(hits.size)

    @property
    def motion_steps(self) -> int:
        return len(self._motion_steps)

    @property
    def collision_steps(self) -> int:
        return len(self._collision_steps)

    def summary(self) -> dict[str, Any]:
        """JSON-ready collision fields; rates are ``None`` when there was no motion step."""
        n = len(self._motion_steps)
        return {
            "motion_steps": n,
            "collision_steps": len(self._collision_steps),
            "collision_rate": len(self._collision_steps) / n if n else None,
            "collision_steps_by_group": {g: len(s) for g, s in self._group_steps.items()},
            "collision_rate_by_group": {
                g: (len(s) / n if n else None) for g, s in self._group_steps.items()
            },
            "floor_height_m": self.floor_height_m,
        }
