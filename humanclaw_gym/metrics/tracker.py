"""The metric tracker protocol and the records a tracker receives.

A *tracker* is one part of ``metrics.json``: it declares its output (a
:class:`~humanclaw_gym.metrics.fields.MetricSpec`: fields with units, ranges and the
``humanclaw_metrics_v<N>`` layout that introduced each, plus its summary columns), what the
env must compute for it (observer ``needs``), the fixed numbers it scores with
(``thresholds``, recorded in every file), and consumes one episode's events:

    tracker = MyTracker()
    tracker.on_reset(start)            # EpisodeStart: the episode, its floor, targets, rules
    tracker.on_decision(decision)      # DecisionRecord, every decision (the Stop included)
    tracker.on_frame(frame)            # FrameRecord, every realized 30 Hz frame, in order
    fields = tracker.summary(end)      # EpisodeEnd -> its fields of metrics.json

The records are validated by the
:class:`~humanclaw_gym.metrics.episode.EpisodeMetricRecorder` before any tracker sees them
(shapes, dtypes, event order), so trackers only compute. A record's arrays must not be
modified (they are shared by every tracker). The recorder, the metrics wrapper, the schema
check and the summary table all derive from the tuple of trackers in
:mod:`humanclaw_gym.metrics.trackers`; adding a metric is one module with a tracker class,
one line in that tuple and a test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import numpy as np

from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS
from humanclaw_gym.metrics._checks import as_finite_float, as_id_set, as_int
from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.metrics.fields import MetricSpec
    from humanclaw_gym.policy import Usage
    from humanclaw_gym.skills import Skill

__all__ = [
    "TRACKER_NEEDS",
    "DecisionRecord",
    "EpisodeEnd",
    "EpisodeFacts",
    "EpisodeStart",
    "FrameRecord",
    "Tracker",
    "check_start_fields",
]

#: Observer needs a tracker may declare (see :mod:`humanclaw_gym.envs.events`):
#: ``"instance"`` (the decision's instance image, for ``target_pixels``) and ``"contacts"``
#: (the contact rows of every frame and of the reset state, and the spawn floor ray).
TRACKER_NEEDS = frozenset({"instance", "contacts"})


@dataclass(frozen=True, eq=False)
class EpisodeFacts:
    """What the metrics wrapper knows of every episode as it starts, whatever the task:
    the task turns it into the record its trackers start from (``task.metric_start``,
    e.g. :class:`EpisodeStart` for the benchmark's trackers). The trackers shared by
    tasks (collision, disturbance, jerk, motion anomaly, usage) read only the fields of
    this record that :class:`EpisodeStart` has too.

    Attributes:
        episode_id / scene_id: identifiers.
        episode: the (resolved) episode record; scene: the loaded scene spec.
        dynamic_ids: ids of the scene's movable objects.
        floor_height_m / floor_source: the episode floor (world y, metres) and where it
            came from (see :func:`~humanclaw_gym.metrics.collision.episode_floor`).
        initial_penetration_m: deepest humanoid penetration at reset, metres.
        rules: the metric rules; rollout_index: earlier rollouts of this episode.
        object_handles: Habitat instance handles of the scene's objects, or None.
        link_names: the humanoid's link names (a body asset's), or None.
    """

    episode_id: str
    scene_id: str
    episode: Any
    scene: Any
    dynamic_ids: tuple[int, ...]
    floor_height_m: float
    floor_source: str
    initial_penetration_m: float
    rules: str
    rollout_index: int
    object_handles: Mapping[int, str] | None = None
    link_names: Sequence[str] | None = None


@dataclass(frozen=True, eq=False)
class EpisodeStart:
    """What is known when an episode starts (validated when made).

    Attributes:
        episode_id / scene_id: identifiers (non-empty).
        category: target category, one of ``TARGET_CATEGORIES``.
        target_ids: scene object ids of the resolved target instances (>= 1, at least one).
        target_aabbs: ``float64 (K, 2, 3)`` world AABBs (min, max corners) of the targets,
            metres, one per id.
        interact: the episode ends with sitting on the target.
        dynamic_ids: ids of the scene's movable objects (sorted).
        floor_height_m: the episode floor, world y in metres (see
            :func:`~humanclaw_gym.metrics.collision.episode_floor`).
        initial_penetration_m: deepest humanoid penetration of the reset-time contact
            query, metres, >= 0.
        difficulty: the episode's difficulty label, or None.
        rules: the metric rules, ``"paper"`` or ``"strict"``.
        floor_source: where ``floor_height_m`` came from.
        rollout_index: earlier rollouts of this episode in the same output.
        object_handles: Habitat instance handles of the scene's objects
            (:func:`~humanclaw_gym.metrics.interact.scene_object_handles`), or None; under
            ``paper`` rules Interact also counts objects sharing a target's template.
        link_names: the humanoid's link names in the order of the contacts' ``link_a`` (a
            body asset's links, which also name their collision body groups), or None for
            the built-in skeleton (``JOINT_NAMES``).
    """

    episode_id: str
    scene_id: str
    category: str
    target_ids: Sequence[int]
    target_aabbs: np.ndarray
    interact: bool
    dynamic_ids: Sequence[int]
    floor_height_m: float
    initial_penetration_m: float
    difficulty: str | None = None
    rules: str = DEFAULT_METRIC_RULES
    floor_source: str = "spawn_raycast"
    rollout_index: int = 0
    object_handles: Mapping[int, str] | None = None
    link_names: Sequence[str] | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        check_start_fields(self)
        if not isinstance(self.category, str) or not self.category:
            raise ValueError(f"category must be a non-empty string, got {self.category!r}")
        if self.category not in TARGET_CATEGORIES:
            raise ValueError(f"category must be one of {TARGET_CATEGORIES}, got {self.category!r}")
        if not isinstance(self.interact, (bool, np.bool_)):
            raise ValueError(f"interact must be a bool, got {self.interact!r}")
        put("interact", bool(self.interact))
        ids = tuple(as_int(v, f"target_ids[{i}]", 1) for i, v in enumerate(self.target_ids))
        if not ids:
            raise ValueError("target_ids must contain at least one object id")
        aabbs = np.array(self.target_aabbs, dtype=np.float64)
        if aabbs.shape != (len(ids), 2, 3):
            raise ValueError(
                f"target_aabbs must have shape ({len(ids)}, 2, 3) (one box per target id), "
                f"got {aabbs.shape}"
            )
        body_to_target_aabb_distance(np.zeros((1, 3)), aabbs)  # validates the boxes
        aabbs.setflags(write=False)
        put("target_ids", ids)
        put("target_aabbs", aabbs)


def check_start_fields(start: Any) -> None:
    """Check and normalise, in place, the fields every tracker start record shares with
    :class:`EpisodeStart` (a frozen dataclass's ``__post_init__`` calls it): the ids,
    ``rules``, ``rollout_index``, ``difficulty``, ``initial_penetration_m``,
    ``dynamic_ids`` (sorted), ``floor_height_m``, ``object_handles`` and ``link_names``.

    Raises:
        ValueError: naming the field and what is allowed.
    """

    def put(name: str, value: Any) -> None:
        object.__setattr__(start, name, value)

    put("rules", check_rules(start.rules))
    put("rollout_index", as_int(start.rollout_index, "rollout_index", 0))
    for name in ("episode_id", "scene_id"):
        value = getattr(start, name)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    if start.difficulty is not None and start.difficulty not in DIFFICULTY_LABELS:
        raise ValueError(
            f"difficulty must be one of {DIFFICULTY_LABELS} or None, got {start.difficulty!r}"
        )
    penetration = as_finite_float(start.initial_penetration_m, "initial_penetration_m")
    if penetration < 0:
        raise ValueError(f"initial_penetration_m must be >= 0, got {start.initial_penetration_m!r}")
    put("initial_penetration_m", penetration)
    put("dynamic_ids", tuple(sorted(as_id_set(start.dynamic_ids, "dynamic_ids"))))
    put("floor_height_m", as_finite_float(start.floor_height_m, "floor_height_m"))
    if start.object_handles is not None:
        put("object_handles", dict(start.object_handles))
    if start.link_names is not None:
        names = tuple(start.link_names)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"link_names must be non-empty link names, got {names[:3]!r}")
        put("link_names", names)


class DecisionRecord(NamedTuple):
    """One decision, the final Stop included.

    Attributes:
        step: decision step index (strictly increasing).
        skill: the executed skill.
        target_pixels: target-instance pixel count of the semantic render of the ego image
            this decision was made from (>= 0).
        visible_state: the policy's visibility statement, or None.
        usage: one ``Usage`` per real model call of this decision, retries included.
    """

    step: int
    skill: Skill
    target_pixels: int
    visible_state: str | None
    usage: tuple[Usage, ...] = ()


class FrameRecord(NamedTuple):
    """One realized (post-physics) 30 Hz frame of the current motion decision.

    Attributes:
        step: the decision step.
        skill: that decision's skill.
        frame_index: 0-based index within the chunk.
        last_in_chunk: the chunk's final frame (the landed pose).
        generated: ``float64 (75,)`` the commanded (generated) frame.
        realized: ``float64 (75,)`` the realized pose after this frame.
        contacts: ``CONTACT_DTYPE (N,)`` rows of this frame's contact query.
        object_ids: ids of the dynamic objects, the rows of ``object_positions``.
        object_positions: ``float64 (M, 3)`` their world positions, metres.
    """

    step: int
    skill: Skill
    frame_index: int
    last_in_chunk: bool
    generated: np.ndarray
    realized: np.ndarray
    contacts: np.ndarray
    object_ids: tuple[int, ...]
    object_positions: np.ndarray


@dataclass(frozen=True, eq=False)
class EpisodeEnd:
    """How the episode ended.

    Attributes:
        ended_by: ``"stop"`` (the policy's Stop, an active stop), ``"truncated"`` (step
            limit) or ``"error"``.
        steps: decisions recorded, the Stop included.
        final_body_points: ``float64 (P, 3)`` world points of the final realized body
            (pelvis, articulated root, every link origin), metres.
    """

    ended_by: str
    steps: int
    final_body_points: np.ndarray

    @property
    def active_stop(self) -> bool:
        return self.ended_by == "stop"


@runtime_checkable
class Tracker(Protocol):
    """One metric part of ``metrics.json`` (see the module docstring).

    Class attributes:
        spec: the declared output fields (units, ranges, ``since`` layouts) and summary
            columns.
        needs: observer needs, a subset of :data:`TRACKER_NEEDS`.
        thresholds: the fixed numbers it scores with, recorded under ``thresholds`` in
            every file (names carry units).

    A tracker is made without arguments; :meth:`on_reset` starts an episode (and forgets
    any earlier one).
    """

    spec: ClassVar[MetricSpec]
    needs: ClassVar[frozenset[str]]
    thresholds: ClassVar[Mapping[str, float | int]]

    def on_reset(self, start: EpisodeStart) -> None: ...

    def on_decision(self, decision: DecisionRecord) -> None: ...

    def on_frame(self, frame: FrameRecord) -> None: ...

    def summary(self, end: EpisodeEnd) -> dict[str, Any]: ...
