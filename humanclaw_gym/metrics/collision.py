"""Fixed-geometry collision, the episode floor and the initial penetration diagnostic.

All three read the same per-frame contact rows (:data:`~humanclaw_gym.physics.types.
CONTACT_DTYPE`) that the physics backend produces for the realized, post-physics pose at
30 Hz; nothing is re-simulated or interpolated.

* The *floor* of an episode is measured once at spawn: of the surfaces hit by a downward
  ray, the highest one that is not above the standing body's lowest point + 5 cm. When no
  hit qualifies, ``paper`` rules fall back to the body's lowest point and ``strict`` rules
  refuse the episode.
* A *collision contact* is a humanoid contact with fixed geometry whose contact point on the
  other body lies more than 0.0205 m above that floor (so standing, stepping and shuffling
  on the floor never count, climbing onto a stair or bumping into furniture does). Fixed
  geometry is any body that is not a movable object under ``paper`` rules (unknown bodies,
  id < 1, included, as the reference counts stage and unknown bodies), and only scene
  objects (id >= 1) that are not movable under ``strict`` rules.
* A motion decision step *collides* when any of its frames has a collision contact.
  ``collision_rate = colliding motion steps / motion steps``; the same step sets are kept
  per body group (arm/hand, torso, leg/foot, head) of the touching humanoid link
  (:func:`collision_body_group`: the collars are arm/hand and the neck is torso under
  ``paper`` rules, torso and head under ``strict`` rules). Without any motion step the rates
  are 0.0 under ``paper`` rules and ``None`` under ``strict`` rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from humanclaw_gym.body.skeleton import BODY_GROUPS, JOINT_NAMES, joint_body_group
from humanclaw_gym.metrics._checks import (
    as_contacts,
    as_finite_float,
    as_id_set,
    as_int,
    check_human_links,
)
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.metrics.thresholds import (
    COLLISION_MIN_HEIGHT_M,
    FLOOR_SELECT_EPSILON_M,
    INITIAL_PENETRATION_FLAG_M,
)
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID

__all__ = [
    "COLLISION_SPEC",
    "FLOOR_SOURCES",
    "CollisionMetric",
    "CollisionTracker",
    "collision_body_group",
    "collision_contact_mask",
    "episode_floor",
    "initial_penetration",
    "is_collision_contact",
    "spawn_floor_height",
]

#: Where an episode's floor came from: the spawn ray, or (``paper`` rules only) the body's
#: lowest point because no ray hit qualified.
FLOOR_SOURCES: tuple[str, ...] = ("spawn_raycast", "body_lowest_point_fallback")

# The reference release groups the collars with the arm and the neck with the torso.
_PAPER_GROUP_OVERRIDES = {"left_collar": "arm/hand", "right_collar": "arm/hand", "neck": "torso"}


def collision_body_group(joint: int | str, rules: str = DEFAULT_METRIC_RULES) -> str:
    """The collision body group (a key of ``BODY_GROUPS``) of a humanoid link, by the
    skeleton's joint index or by any link's name.

    A joint of the skeleton: ``strict`` uses :data:`humanclaw_gym.body.skeleton.BODY_GROUPS`
    as it is; ``paper`` moves the collars to ``arm/hand`` and the neck to ``torso`` as the
    reference does. Another link of a body asset (an SMPL-X body's jaw, eyes and finger
    links) takes the reference release's name rule under both rules
    (:func:`humanclaw_gym.body.asset.release_body_group`: fingers ``arm/hand``, jaw and
    eyes ``head``, anything else ``torso``).
    """
    if isinstance(joint, str) and joint not in JOINT_NAMES:
        from humanclaw_gym.body.asset import release_body_group

        check_rules(rules)
        return release_body_group(joint)
    group = joint_body_group(joint)
    if check_rules(rules) == "paper":
        name = JOINT_NAMES[int(joint)] if not isinstance(joint, str) else joint
        return _PAPER_GROUP_OVERRIDES.get(name, group)
    return group


def collision_contact_mask(
    contacts: np.ndarray,
    dynamic_ids: Iterable[int],
    floor_height_m: float,
    min_height_m: float = COLLISION_MIN_HEIGHT_M,
    rules: str = DEFAULT_METRIC_RULES,
) -> np.ndarray:
    """Which contact rows are fixed-geometry collisions.

    A row qualifies when the humanoid is body ``a``, body ``b`` is fixed geometry and
    ``pos_b[1] - floor_height_m > min_height_m`` (the height of the contact point on the
    other body above the floor, metres). Fixed geometry: any ``b`` that is not dynamic
    (``paper``), or a scene object (id >= 1) that is not dynamic (``strict``).

    Args:
        contacts: ``CONTACT_DTYPE (N,)`` rows of one frame.
        dynamic_ids: ids of the scene's movable (dynamic) objects.
        floor_height_m: the episode floor (world y, metres), see :func:`spawn_floor_height`.
        min_height_m: height threshold above the floor (m).
        rules: ``"paper"`` or ``"strict"``.

    Returns:
        ``bool (N,)``.
    """
    rules = check_rules(rules)
    rows = as_contacts(contacts)
    floor = as_finite_float(floor_height_m, "floor_height_m")
    dynamic = np.fromiter(as_id_set(dynamic_ids, "dynamic_ids"), dtype=np.int64)
    if rows.size == 0:
        return np.zeros(0, dtype=bool)
    human = rows["a"] == HUMAN_ID
    fixed = ~np.isin(rows["b"], dynamic)
    if rules == "strict":
        fixed &= rows["b"] >= 1
    high = (rows["pos_b"][:, 1] - floor) > float(min_height_m)
    return human & fixed & high


def is_collision_contact(
    contact: np.void | np.ndarray,
    dynamic_ids: Iterable[int],
    floor_height_m: float,
    min_height_m: float = COLLISION_MIN_HEIGHT_M,
    rules: str = DEFAULT_METRIC_RULES,
) -> bool:
    """Whether one contact row is a fixed-geometry collision (see :func:`collision_contact_mask`)."""
    return bool(
        collision_contact_mask(
            np.asarray(contact).reshape(1), dynamic_ids, floor_height_m, min_height_m, rules
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


def episode_floor(
    ray_floor_y: float | None, body_lowest_y: float, rules: str = DEFAULT_METRIC_RULES
) -> tuple[float, str]:
    """The episode floor from the spawn ray's result, with the rules' fallback.

    Args:
        ray_floor_y: the floor chosen by the spawn ray rule (see :func:`spawn_floor_height`),
            or ``None`` when no ray hit qualified.
        body_lowest_y: world y (m) of the standing body's lowest point at spawn.
        rules: ``"paper"`` falls back to ``body_lowest_y``; ``"strict"`` raises.

    Returns:
        ``(floor height in metres, source)`` with ``source`` one of :data:`FLOOR_SOURCES`.

    Raises:
        ValueError: under ``strict`` rules when ``ray_floor_y`` is ``None``.
    """
    rules = check_rules(rules)
    lowest = as_finite_float(body_lowest_y, "body_lowest_y")
    if ray_floor_y is not None:
        return as_finite_float(ray_floor_y, "ray_floor_y"), "spawn_raycast"
    if rules == "strict":
        raise ValueError(
            f"no floor under the spawn: the downward ray found no surface at or below the "
            f"body's lowest point {lowest} + {FLOOR_SELECT_EPSILON_M} m (strict metric rules "
            "refuse the episode; paper rules fall back to the body's lowest point)"
        )
    return lowest, "body_lowest_point_fallback"


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
        rules: the metric rules (fixed geometry, body groups, rates without motion).
        floor_source: where the floor came from, one of :data:`FLOOR_SOURCES` (see
            :func:`episode_floor`).
        link_names: the humanoid's link names, the order of the contact rows' ``link_a``
            (a body asset's links); None: the skeleton's ``JOINT_NAMES``. Each link's body
            group is :func:`collision_body_group` of its name.
    """

    def __init__(
        self,
        dynamic_ids: Iterable[int],
        floor_height_m: float,
        rules: str = DEFAULT_METRIC_RULES,
        floor_source: str = "spawn_raycast",
        link_names: Sequence[str] | None = None,
    ) -> None:
        self.rules = check_rules(rules)
        if floor_source not in FLOOR_SOURCES:
            raise ValueError(f"floor_source must be one of {FLOOR_SOURCES}, got {floor_source!r}")
        if floor_source != "spawn_raycast" and self.rules == "strict":
            raise ValueError("floor_source: strict metric rules allow only 'spawn_raycast'")
        self.floor_source = floor_source
        self._dynamic_ids = as_id_set(dynamic_ids, "dynamic_ids")
        self.floor_height_m = as_finite_float(floor_height_m, "floor_height_m")
        self._motion_steps: set[int] = set()
        self._collision_steps: set[int] = set()
        self._group_steps: dict[str, set[int]] = {group: set() for group in BODY_GROUPS}
        names = JOINT_NAMES if link_names is None else tuple(link_names)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"link_names must be non-empty link names, got {link_names!r}")
        self.link_names = names
        self._group_of = [
            collision_body_group(j if link_names is None else n, self.rules)
            for j, n in enumerate(names)
        ]

    def record_frame(self, step: int, contacts: np.ndarray) -> bool:
        """Record one realized frame of motion decision ``step``.

        Returns:
            ``True`` when the frame has at least one collision contact.
        """
        step = as_int(step, "step", 0)
        rows = as_contacts(contacts)
        check_human_links(rows, len(self.link_names))
        self._motion_steps.add(step)
        mask = collision_contact_mask(
            rows, self._dynamic_ids, self.floor_height_m, rules=self.rules
        )
        hits = rows[mask]
        for link in set(hits["link_a"].tolist()):  # each touching link once
            self._group_steps[self._group_of[link]].add(step)
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
        """JSON-ready collision fields. Without any motion step the rates are 0.0 under
        ``paper`` rules and ``None`` under ``strict`` rules."""
        n = len(self._motion_steps)
        empty = 0.0 if self.rules == "paper" else None
        return {
            "motion_steps": n,
            "collision_steps": len(self._collision_steps),
            "collision_rate": len(self._collision_steps) / n if n else empty,
            "collision_steps_by_group": {g: len(s) for g, s in self._group_steps.items()},
            "collision_rate_by_group": {
                g: (len(s) / n if n else empty) for g, s in self._group_steps.items()
            },
            "floor_height_m": self.floor_height_m,
            "floor_source": self.floor_source,
        }


#: The reference layout's names of the body groups (ours, reference).
_REFERENCE_GROUPS = (
    ("arm/hand", "hand_arm"),
    ("torso", "torso"),
    ("leg/foot", "leg"),
    ("head", "head"),
)
#: ... and of the floor sources.
_REFERENCE_FLOORS = (
    ("spawn_raycast", "spawn_raycast"),
    ("body_lowest_point_fallback", "agent_min_y_fallback"),
)


def _group_fields() -> tuple[MetricField, ...]:
    return (
        MetricField(
            "collision_steps_by_group",
            "int_map",
            "colliding motion steps per body group (keys: BODY_GROUPS)",
            unit="steps",
            minimum=0,
        ),
        MetricField(
            "collision_rate_by_group",
            "number_map",
            "collision rate per body group (keys: BODY_GROUPS)",
            minimum=0.0,
            maximum=1.0,
            nullable=True,
            aggregate="like Coll., per group",
            upstream="body_scene.by_body_group_step_fraction",
            upstream_labels=_REFERENCE_GROUPS,
        ),
    )


#: Declared output of the collision metric and of the reset-time penetration diagnostic
#: (see :mod:`humanclaw_gym.metrics.fields`).
COLLISION_SPEC = MetricSpec(
    name="collision",
    fields=(
        MetricField(
            "motion_steps",
            "int",
            "decision steps with motion",
            unit="steps",
            minimum=0,
            upstream="body_scene.motion_steps",
        ),
        MetricField(
            "collision_steps",
            "int",
            "motion steps with a fixed-geometry collision",
            unit="steps",
            minimum=0,
            at_most="motion_steps",
            upstream="body_scene.collision_steps",
        ),
        MetricField(
            "collision_rate",
            "number",
            "collision_steps / motion_steps (without motion: 0.0 under paper, null under strict)",
            minimum=0.0,
            maximum=1.0,
            nullable=True,
            aggregate="Coll.: mean over episodes (paper: no-motion episodes count 0; strict: "
            "left out)",
            upstream="body_scene.collision_step_fraction",
        ),
        *_group_fields(),
        MetricField(
            "floor_height_m",
            "number",
            "the episode floor, world y",
            unit="m",
            upstream="body_scene.episode_floor_y",
        ),
        MetricField(
            "floor_source",
            "str",
            "where the floor came from",
            choices=FLOOR_SOURCES,
            since=2,
            legacy="spawn_raycast",
            upstream="body_scene.episode_floor_source",
            upstream_labels=_REFERENCE_FLOORS,
        ),
        MetricField(
            "initial_penetration_m",
            "number",
            "deepest humanoid penetration at reset",
            unit="m",
            minimum=0.0,
            after="generated_frames",
            upstream="body_scene.initial_penetration_depth_m",
        ),
        MetricField(
            "initial_penetration_flag",
            "bool",
            "initial penetration above 0.01 m (diagnostic only)",
            aggregate="counted",
            upstream="body_scene.initial_penetration_detected",
        ),
    ),
    columns=(
        Column(
            "Coll.",
            "collision_pct",
            "main",
            ".1f",
            Reduce("collision", "collision_rate", scale=100.0),
            3,
        ),
    ),
)


class CollisionMetric:
    """Tracker of the collision rates and the initial penetration (:data:`COLLISION_SPEC`,
    the ``"contacts"`` need). A chunk's contact rows are scored together when its last
    frame arrives (or at the summary): the step sets come out as frame by frame."""

    spec: ClassVar[MetricSpec] = COLLISION_SPEC
    needs: ClassVar[frozenset[str]] = frozenset({"contacts"})
    thresholds: ClassVar[dict[str, float | int]] = {
        "collision_min_height_m": COLLISION_MIN_HEIGHT_M,
        "initial_penetration_flag_m": INITIAL_PENETRATION_FLAG_M,
    }

    def on_reset(self, start: EpisodeStart) -> None:
        self._tracker = CollisionTracker(
            start.dynamic_ids,
            start.floor_height_m,
            start.rules,
            start.floor_source,
            link_names=start.link_names,
        )
        self._penetration_m = start.initial_penetration_m
        self._pending: list[np.ndarray] = []
        self._pending_step = -1

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        self._pending.append(frame.contacts)
        self._pending_step = frame.step
        if frame.last_in_chunk:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            pending = self._pending
            if all(c.dtype == CONTACT_DTYPE for c in pending):
                # joined as bytes: np.concatenate is slow for structured dtypes
                rows = np.frombuffer(b"".join(c.tobytes() for c in pending), CONTACT_DTYPE)
            else:  # other structured layouts holding the contact fields
                rows = np.concatenate(pending)
            self._tracker.record_frame(self._pending_step, rows)
            self._pending = []

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        self._flush()
        return {
            **self._tracker.summary(),
            "initial_penetration_m": self._penetration_m,
            "initial_penetration_flag": bool(self._penetration_m > INITIAL_PENETRATION_FLAG_M),
        }
