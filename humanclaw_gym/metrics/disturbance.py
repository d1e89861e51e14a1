"""Movable-object disturbance: which dynamic objects the humanoid set in motion, and how far
they travelled afterwards.

Frames are consumed in time order. In each frame:

1. every dynamic object in a humanoid contact row becomes *affected* (directly) at this
   frame;
2. the frame's dynamic-dynamic contact rows form an undirected graph; every object
   connected to an affected object (through any chain of such contacts in this frame)
   becomes affected (indirectly) at this frame.

Affectedness never travels backwards in time: an object that touched another one *before*
that one was affected stays unaffected (unless a later contact links it again).

An affected object's path length is the sum of the distances between its positions on
consecutive frames from its first affected frame onwards (its motion up to and including the
first affected frame does not count), in metres.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from humanclaw_gym.metrics._checks import as_contacts, as_id_set, as_int
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.physics.types import HUMAN_ID

__all__ = ["DISTURBANCE_SPEC", "DisturbanceMetric", "DisturbanceTracker"]


class DisturbanceTracker:
    """Online affected-object graph and path lengths of one episode.

    Args:
        dynamic_ids: ids of the scene's movable objects (>= 1).
    """

    def __init__(self, dynamic_ids: Iterable[int]) -> None:
        self._dynamic = as_id_set(dynamic_ids, "dynamic_ids")
        self._frame = 0
        self._first_frame: dict[int, int] = {}
        self._direct: set[int] = set()
        self._last_pos: dict[int, np.ndarray] = {}
        self._path_m: dict[int, float] = {}

    @property
    def frames(self) -> int:
        """Number of frames recorded so far."""
        return self._frame

    def record_frame(
        self,
        contacts: np.ndarray,
        object_ids: Sequence[int],
        object_positions: np.ndarray,
    ) -> list[int]:
        """Consume the next realized frame.

        Args:
            contacts: ``CONTACT_DTYPE`` rows of this frame.
            object_ids: ``(M,)`` ids of the objects whose positions are given.
            object_positions: ``(M, 3)`` world positions (metres) of those objects at this
                frame. Objects missing here keep their last known position.

        Returns:
            Ids that became affected at this frame (sorted).
        """
        rows = as_contacts(contacts)
        ids = [as_int(v, f"object_ids[{i}]", 1) for i, v in enumerate(object_ids)]
        pos = np.asarray(object_positions, dtype=np.float64)
        if pos.shape != (len(ids), 3):
            raise ValueError(
                f"object_positions must have shape ({len(ids)}, 3) to match object_ids, "
                f"got {pos.shape}"
            )
        return self._advance(rows, ids, pos)

    def _advance(self, rows: np.ndarray, ids: Sequence[int], pos: np.ndarray) -> list[int]:
        """:meth:`record_frame` on checked input."""
        frame = self._frame
        newly: list[int] = []

        def mark(obj: int) -> None:
            if obj not in self._first_frame:
                self._first_frame[obj] = frame
                self._path_m[obj] = 0.0
                newly.append(obj)

        adjacency: dict[int, set[int]] = {}
        for a, b in zip(rows["a"].tolist(), rows["b"].tolist(), strict=True):
            if a == HUMAN_ID:
                if b in self._dynamic:
                    self._direct.add(b)
                    mark(b)
            elif a in self._dynamic and b in self._dynamic and a != b:
                adjacency.setdefault(a, set()).add(b)
                adjacency.setdefault(b, set()).add(a)
        queue = deque(obj for obj in adjacency if obj in self._first_frame)
        seen = set(queue)
        while queue:
            obj = queue.popleft()
            for other in adjacency[obj]:
                if other not in seen:
                    seen.add(other)
                    mark(other)
                    queue.append(other)

        first = self._first_frame
        for k, obj in enumerate(ids):
            if obj not in first:
                continue
            p = pos[k]
            if not np.all(np.isfinite(p)):
                continue
            last = self._last_pos.get(obj)
            if last is not None:
                self._path_m[obj] += float(np.linalg.norm(p - last))
            self._last_pos[obj] = p.copy()
        self._frame += 1
        return sorted(newly)

    def summary(self) -> dict[str, Any]:
        """JSON-ready disturbance fields.

        ``affected_object_path_length_m`` maps each affected id (as a string) to its path
        length in metres, or ``None`` when its position was never given after it was
        affected (such objects count as affected but not in the path-length pool).
        """
        lengths: dict[str, float | None] = {}
        for obj in sorted(self._first_frame):
            lengths[str(obj)] = self._path_m[obj] if obj in self._last_pos else None
        measured = [v for v in lengths.values() if v is not None]
        return {
            "affected_object_count": len(self._first_frame),
            "direct_affected_object_count": len(self._direct),
            "affected_object_first_frame": {
                str(k): v for k, v in sorted(self._first_frame.items())
            },
            "affected_object_path_length_m": lengths,
            "affected_objects_with_path": len(measured),
            "affected_path_length_sum_m": float(sum(measured)),
        }


#: Declared output of the disturbance metric (see :mod:`humanclaw_gym.metrics.fields`).
DISTURBANCE_SPEC = MetricSpec(
    name="disturbance",
    fields=(
        MetricField(
            "affected_object_count",
            "int",
            "movable objects set in motion (directly or through other objects)",
            minimum=0,
            aggregate="#Dtb/ep: mean over all episodes",
            upstream="body_scene.affected_dynamic_object_count",
        ),
        MetricField(
            "direct_affected_object_count",
            "int",
            "movable objects the humanoid touched itself",
            minimum=0,
            at_most="affected_object_count",
            upstream="body_scene.direct_dynamic_object_count",
        ),
        MetricField(
            "affected_object_first_frame",
            "object",
            "first affected frame per object id",
        ),
        MetricField(
            "affected_object_path_length_m",
            "object",
            "path length after being affected per object id (null: never measured)",
            unit="m",
        ),
        MetricField(
            "affected_objects_with_path",
            "int",
            "affected objects with a measured path",
            minimum=0,
            at_most="affected_object_count",
            aggregate="dDtb denominator (summed)",
            upstream="body_scene.mapped_affected_dynamic_object_count",
        ),
        MetricField(
            "affected_path_length_sum_m",
            "number",
            "summed path length of the affected objects",
            unit="m",
            minimum=0.0,
            aggregate="dDtb: summed over episodes / summed affected_objects_with_path",
            upstream="body_scene.affected_object_path_length_sum_m",
        ),
    ),
    columns=(
        Column(
            "#Dtb/ep",
            "disturbed_objects_per_episode",
            "main",
            ".2f",
            Reduce("mean", "affected_object_count"),
            4,
        ),
        Column(
            "dDtb(m)",
            "disturbed_path_m",
            "main",
            ".3f",
            Reduce("pooled", "affected_path_length_sum_m", "affected_objects_with_path"),
            5,
        ),
    ),
)


class DisturbanceMetric:
    """Tracker of the movable-object disturbance (:data:`DISTURBANCE_SPEC`, the
    ``"contacts"`` need), frame by frame in time order."""

    spec: ClassVar[MetricSpec] = DISTURBANCE_SPEC
    needs: ClassVar[frozenset[str]] = frozenset({"contacts"})
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: EpisodeStart) -> None:
        self._tracker = DisturbanceTracker(start.dynamic_ids)

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        self._tracker._advance(frame.contacts, frame.object_ids, frame.object_positions)

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        return self._tracker.summary()
