"""The per-episode metric recorder and the ``metrics.json`` schema (``humanclaw_metrics_v2``).

:class:`EpisodeMetricRecorder` is fed by the environment's metrics wrapper while an episode
runs and produces one JSON-ready dict at the end. Event order for one episode::

    rec = EpisodeMetricRecorder(EpisodeStart(...))        # after reset: floor, penetration known
    for each decision step s = 0, 1, ...:
        rec.record_decision(s, target_pixels, visible_state, skill, usage)
        if skill is not Stop:
            rec.record_generated_chunk(s, frames_75)      # the 15 generated frames
            for i in range(15):                           # the realized frames, in order
                rec.record_frame(s, skill, i, i == 14, contacts, object_ids, object_positions,
                                 realized_75)
            # or several frames at once: rec.record_frames(s, skill, 0, True, contacts_15,
            #                                 object_ids, positions_15, realized_15)
    metrics = rec.finalize(final_body_points, ended_by)   # "stop" | "truncated" | "error"
    write_metrics_json(run_dir / "metrics.json", metrics)

The recorder checks every event (types, shapes, order) before any tracker sees it, then
hands it to the trackers of :data:`~humanclaw_gym.metrics.trackers.TRACKERS`, one per part
of metrics.json; :meth:`~EpisodeMetricRecorder.finalize` merges their summaries in the
file's layout. Contact rows are consumed as they come and never stored beyond a chunk.

The content of metrics.json is declared field by field by :data:`METRIC_SPECS` (one
:class:`~humanclaw_gym.metrics.fields.MetricSpec` per tracker); :func:`validate_metrics`
checks a file against those declarations, reading an older layout with the ``legacy``
values of the fields it predates.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.body.skeleton import BODY_GROUPS, FRAME_DIM, NUM_JOINTS
from humanclaw_gym.fileio import write_text_atomic
from humanclaw_gym.metrics._checks import (
    as_contacts,
    as_int,
    as_skill,
    check_human_links,
    check_object_positions,
)
from humanclaw_gym.metrics.fields import check_field, field_value
from humanclaw_gym.metrics.outcome import ENDED_BY, OutcomeMetric
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.metrics.trackers import (
    BENCHMARK_SUITE,
    METRIC_SPECS,
    METRICS_SCHEMA,
    METRICS_SCHEMAS,
    METRICS_VERSION,
    MetricSuite,
    schema_version,
    suite_for_schema,
)
from humanclaw_gym.metrics.usage import check_usage
from humanclaw_gym.physics.types import CONTACT_DTYPE
from humanclaw_gym.skills import Skill

if TYPE_CHECKING:
    from humanclaw_gym.policy import Usage

__all__ = [
    "ENDED_BY",
    "METRICS_SCHEMA",
    "METRICS_SCHEMAS",
    "METRIC_SPECS",
    "EpisodeMetricRecorder",
    "EpisodeStart",
    "MetricsFileError",
    "validate_metrics",
    "write_metrics_json",
]


class MetricsFileError(ValueError):
    """A metrics dict or file does not follow the ``humanclaw_metrics_v2`` schema (or a
    layout that is read, see :mod:`humanclaw_gym.metrics.formats`)."""


def _finite(values: np.ndarray) -> bool:
    """Whether every entry is finite (a finite sum says so in one reduction; an infinite
    one may come from finite entries that overflow, so then each entry is checked)."""
    return math.isfinite(values.sum()) or bool(np.all(np.isfinite(values)))


def write_metrics_json(path: str | os.PathLike[str], metrics: Mapping[str, Any]) -> Path:
    """Write ``metrics`` as indented JSON atomically (temp file + ``os.replace``).

    Non-finite floats are rejected (the schema uses ``null`` for "no value").

    Returns:
        The written path.
    """
    path = Path(path)
    text = json.dumps(metrics, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return write_text_atomic(path, text)


class EpisodeMetricRecorder:
    """Collects every metric of one episode from decision, chunk and frame events.

    Args:
        start: the episode as it starts: for the benchmark's trackers an
            :class:`~humanclaw_gym.metrics.tracker.EpisodeStart` (ids, category, targets
            and their boxes, movable objects, floor, initial penetration, rules, rollout
            index), validated when it was made; for another task's trackers the record its
            ``metric_start`` makes (at least ``episode_id`` and ``rollout_index``).
        suite: the trackers scoring the episode (default: the benchmark's,
            :data:`~humanclaw_gym.metrics.trackers.BENCHMARK_SUITE`).

    Raises:
        ValueError: a tracker refuses the start (e.g. a ``floor_source`` the rules forbid).
    """

    def __init__(self, start: Any, suite: MetricSuite = BENCHMARK_SUITE) -> None:
        if not isinstance(suite, MetricSuite):
            raise TypeError(f"suite must be a MetricSuite, got {type(suite).__name__}")
        if suite is BENCHMARK_SUITE and not isinstance(start, EpisodeStart):
            raise TypeError(f"start must be an EpisodeStart, got {type(start).__name__}")
        for name in ("episode_id", "rollout_index"):
            if not hasattr(start, name):
                raise TypeError(f"start ({type(start).__name__}) has no {name!r}")
        self.start = start
        self.suite = suite
        trackers = [cls() for cls in suite.trackers]
        for tracker in trackers:
            tracker.on_reset(start)
        self._trackers = trackers
        self._steps = 0
        self._last_step: int | None = None
        self._last_skill: Skill | None = None
        self._stopped = False
        self._chunk: np.ndarray | None = None
        self._chunk_steps: set[int] = set()
        self._next_frame_index = 0
        self._chunk_closed = False
        self._object_ids: tuple[Any, tuple[int, ...]] | None = None
        self._result: dict[str, Any] | None = None

    @property
    def episode_id(self) -> str:
        return self.start.episode_id

    @property
    def rollout_index(self) -> int:
        return self.start.rollout_index

    # -- events ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._result is not None:
            raise RuntimeError(f"episode {self.episode_id!r}: recorder already finalized")

    def _check_motion_step(self, step: int, what: str) -> int:
        step = as_int(step, "step", 0)
        if self._last_step is None or step != self._last_step:
            raise ValueError(
                f"{what}: step must be the current decision step {self._last_step}, got {step} "
                "(call record_decision first)"
            )
        if self._last_skill == Skill.STOP:
            raise ValueError(f"{what}: step {step} is a Stop decision and has no motion")
        return step

    def record_decision(
        self,
        step: int,
        target_pixels: int,
        visible_state: str | None,
        skill: Skill | int,
        usage: Sequence[Usage] = (),
    ) -> None:
        """Record one decision (including the final Stop).

        Args:
            step: decision step index, strictly increasing within the episode.
            target_pixels: target-instance pixel count of the semantic render of the ego
                image this decision was made from.
            visible_state: the policy's visibility statement (``None`` if it made none).
            skill: the executed skill.
            usage: one :class:`~humanclaw_gym.policy.Usage` per real model call of this
                decision, retries included.
        """
        self._check_open()
        if self._stopped:
            raise RuntimeError(
                f"episode {self.episode_id!r}: decision after the Stop at step {self._last_step}"
            )
        step = as_int(step, "step", 0)
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"step must increase: got {step} after {self._last_step}")
        skill = as_skill(skill)
        # Check everything before any tracker changes state.
        pixels = as_int(target_pixels, "target_pixels", 0)
        if visible_state is not None and not isinstance(visible_state, str):
            raise ValueError(f"visible_state must be a str or None, got {visible_state!r}")
        usage = tuple(usage)
        check_usage(usage)
        decision = DecisionRecord(step, skill, pixels, visible_state, usage)
        for tracker in self._trackers:
            tracker.on_decision(decision)
        self._steps += 1
        self._last_step = step
        self._last_skill = skill
        self._next_frame_index = 0
        self._chunk_closed = False
        if skill == Skill.STOP:
            self._stopped = True

    def record_generated_chunk(self, step: int, frames_75: np.ndarray) -> None:
        """Record the generated (pre-physics) frames of the current motion decision.

        Args:
            step: the current decision step.
            frames_75: ``(n, 75)`` world-frame generated frames (normally ``n = 15``).
        """
        self._check_open()
        step = self._check_motion_step(step, "record_generated_chunk")
        if step in self._chunk_steps:
            raise ValueError(f"record_generated_chunk: step {step} already has a generated chunk")
        self._chunk = self._check_generated(frames_75, "frames_75")
        self._chunk_steps.add(step)

    @staticmethod
    def _check_generated(frames_75: np.ndarray, name: str) -> np.ndarray:
        frames = np.array(frames_75, dtype=np.float64)
        if frames.ndim != 2 or frames.shape[1] != FRAME_DIM or frames.shape[0] < 1:
            raise ValueError(
                f"{name} must have shape (n, {FRAME_DIM}) with n >= 1, got {frames.shape}"
            )
        if not np.all(np.isfinite(frames)):
            raise ValueError(f"{name} must be finite")
        frames.setflags(write=False)
        return frames

    def _checked_ids(self, object_ids: Sequence[int]) -> tuple[int, ...]:
        """``object_ids`` as checked ints (the check is skipped for the same object)."""
        cached = self._object_ids
        if cached is not None and cached[0] is object_ids:
            return cached[1]
        ids = tuple(as_int(v, f"object_ids[{i}]", 1) for i, v in enumerate(object_ids))
        self._object_ids = (object_ids, ids)
        return ids

    def record_frame(
        self,
        step: int,
        skill: Skill | int,
        frame_index: int,
        last_in_chunk: bool,
        contacts: np.ndarray,
        object_ids: Sequence[int],
        object_positions: np.ndarray,
        realized_75: np.ndarray,
    ) -> None:
        """Record one realized (post-physics) 30 Hz frame of the current motion decision.

        Args:
            step: the current decision step.
            skill: that decision's skill (checked against :meth:`record_decision`).
            frame_index: 0-based index of the frame within its chunk, in order.
            last_in_chunk: ``True`` on the chunk's final frame (the landed pose).
            contacts: ``CONTACT_DTYPE`` rows of this frame's shared contact query.
            object_ids: ids of the dynamic objects whose positions follow.
            object_positions: ``(M, 3)`` world positions of those objects, metres.
            realized_75: ``(75,)`` the realized pose after this frame; compared with row
                ``frame_index`` of the step's generated chunk for ``motion_anomaly`` (so
                :meth:`record_generated_chunk` must come first).
        """
        step, skill, index = self._check_frames_at(step, skill, frame_index, "record_frame")
        rows = as_contacts(contacts)
        # Reject bad input before any tracker changes state.
        self._check_links([rows])
        ids = self._checked_ids(object_ids)
        positions = np.asarray(object_positions, dtype=np.float64)
        if positions.shape != (len(ids), 3):
            check_object_positions(ids, positions)  # raises, naming the shapes
        chunk = self._chunk_of(step, index, 1, "record_frame")
        realized = np.asarray(realized_75, dtype=np.float64)
        if realized.shape != (FRAME_DIM,) or not _finite(realized):
            raise ValueError(
                f"realized_75 must be a finite ({FRAME_DIM},) frame, got shape {realized.shape}"
            )
        self._feed(step, skill, index, last_in_chunk, chunk, [rows], ids, [positions], [realized])

    def record_frames(
        self,
        step: int,
        skill: Skill | int,
        first_index: int,
        last_in_chunk: bool,
        contacts: Sequence[np.ndarray],
        object_ids: Sequence[int],
        object_positions: np.ndarray,
        realized: np.ndarray,
    ) -> None:
        """Record ``k`` consecutive realized frames of the current motion decision at once:
        the same as :meth:`record_frame` on each in order (frame indices ``first_index``
        on, ``last_in_chunk`` for the last of them), the input checked for all of them
        before any tracker sees one.

        Args:
            step, skill: as for :meth:`record_frame`.
            first_index: the chunk index of the first of the frames.
            last_in_chunk: whether the last of the frames is the chunk's final frame.
            contacts: ``k >= 1`` arrays of ``CONTACT_DTYPE`` rows, one per frame.
            object_ids: ids of the dynamic objects whose positions follow.
            object_positions: ``(k, M, 3)`` their world positions after each frame, metres.
            realized: ``(k, 75)`` the realized pose after each frame.
        """
        step, skill, index = self._check_frames_at(step, skill, first_index, "record_frames")
        rows = [as_contacts(c, f"contacts[{i}]") for i, c in enumerate(contacts)]
        k = len(rows)
        if k < 1:
            raise ValueError("record_frames: contacts must hold one array per frame, got none")
        self._check_links(rows)
        ids = self._checked_ids(object_ids)
        positions = np.asarray(object_positions, dtype=np.float64)
        if positions.shape != (k, len(ids), 3):
            raise ValueError(
                f"object_positions must have shape ({k}, {len(ids)}, 3) (frames, object_ids, "
                f"xyz), got {positions.shape}"
            )
        chunk = self._chunk_of(step, index, k, "record_frames")
        poses = np.asarray(realized, dtype=np.float64)
        if poses.shape != (k, FRAME_DIM) or not _finite(poses):
            raise ValueError(
                f"realized must be finite ({k}, {FRAME_DIM}) frames, got shape {poses.shape}"
            )
        self._feed(step, skill, index, last_in_chunk, chunk, rows, ids, positions, poses)

    def _check_frames_at(
        self, step: int, skill: Skill | int, frame_index: int, what: str
    ) -> tuple[int, Skill, int]:
        """The step, skill and first frame index of frames to record, checked against the
        events so far."""
        self._check_open()
        step = self._check_motion_step(step, what)
        skill = as_skill(skill)
        if skill != self._last_skill:
            raise ValueError(
                f"{what}: skill {skill.name} differs from the decision's {self._last_skill.name}"
            )
        if self._chunk_closed:
            raise ValueError(f"{what}: step {step} already received its last_in_chunk frame")
        index = as_int(frame_index, "frame_index", 0)
        if index != self._next_frame_index:
            raise ValueError(
                f"frame_index must be {self._next_frame_index} (frames arrive in order), got {index}"
            )
        return step, skill, index

    def _check_links(self, rows: list[np.ndarray]) -> None:
        """Every humanoid row of the frames' contacts names one of the body's links."""
        links = getattr(self.start, "link_names", None)
        num_links = NUM_JOINTS if links is None else len(links)
        if len(rows) > 1 and all(r.dtype == CONTACT_DTYPE for r in rows):
            # joined as bytes: np.concatenate is slow for structured dtypes
            rows = [np.frombuffer(b"".join(r.tobytes() for r in rows), CONTACT_DTYPE)]
        for r in rows:
            check_human_links(r, num_links)

    def _chunk_of(self, step: int, index: int, count: int, what: str) -> np.ndarray:
        """The step's generated chunk, which must hold frames ``index .. index+count-1``."""
        if step not in self._chunk_steps or self._chunk is None:
            raise ValueError(
                f"{what}: step {step} has no generated chunk (call record_generated_chunk "
                "before its frames)"
            )
        chunk = self._chunk
        if index + count > len(chunk):
            raise ValueError(
                f"frame_index must be < {len(chunk)} (the generated chunk's length), got "
                f"{index + count - 1}"
            )
        return chunk

    def _feed(
        self,
        step: int,
        skill: Skill,
        index: int,
        last_in_chunk: bool,
        chunk: np.ndarray,
        rows: list[np.ndarray],
        ids: tuple[int, ...],
        positions: Sequence[np.ndarray],
        realized: Sequence[np.ndarray],
    ) -> None:
        """Hand checked frames to every tracker, one :class:`FrameRecord` at a time."""
        last = len(rows) - 1
        trackers = self._trackers
        for i, contacts in enumerate(rows):
            final = bool(last_in_chunk) and i == last
            frame = FrameRecord(
                step,
                skill,
                index + i,
                final,
                chunk[index + i],
                realized[i],
                contacts,
                ids,
                positions[i],
            )
            for tracker in trackers:
                tracker.on_frame(frame)
        self._next_frame_index = index + len(rows)
        self._chunk_closed = bool(last_in_chunk)

    # -- result ---------------------------------------------------------------------------

    def finalize(self, final_body_points: np.ndarray, ended_by: str) -> dict[str, Any]:
        """Compute the episode's metrics (the content of metrics.json).

        Args:
            final_body_points: ``(P, 3)`` world points of the final realized body (pelvis,
                articulated root and every link origin), metres.
            ended_by: ``"stop"`` (the policy chose Stop; requires a recorded Stop decision),
                ``"truncated"`` (step limit; no Stop may have been recorded) or ``"error"``.
                Only ``"stop"`` is an active stop.

        Returns:
            JSON-ready dict with the suite's ``"schema"`` (``"humanclaw_metrics_v2"`` for the
            benchmark); its fields are declared by the suite's specs, in the order of its
            ``layout``.
        """
        self._check_open()
        if ended_by not in ENDED_BY:
            raise ValueError(f"ended_by must be one of {ENDED_BY}, got {ended_by!r}")
        if ended_by == "stop" and not self._stopped:
            raise ValueError("ended_by='stop' but no Stop decision was recorded")
        if ended_by == "truncated" and self._stopped:
            raise ValueError("ended_by='truncated' but the policy chose Stop")
        end = EpisodeEnd(ended_by, self._steps, final_body_points)
        suite = self.suite
        merged: dict[str, Any] = {"schema": suite.schema}
        for tracker in self._trackers:
            merged.update(tracker.summary(end))
        merged["thresholds"] = dict(suite.thresholds)
        undeclared = set(merged) - set(suite.layout)
        if undeclared:
            raise RuntimeError(f"metric trackers returned undeclared fields {sorted(undeclared)}")
        result = {key: merged[key] for key in suite.layout}
        self._result = result
        return result


# -- the schema check ----------------------------------------------------------------------


def _validate_suite(metrics: dict[str, Any], suite: MetricSuite, fail: Any) -> dict[str, Any]:
    """:func:`validate_metrics` for a file of another task's layout: every declared field
    (older layouts read with the ``legacy`` values), then each tracker's own cross-field
    rule (an optional ``check(metrics) -> str | None`` of the tracker class)."""
    version = suite.schema_version(metrics["schema"]) or suite.version
    if version < suite.version:
        metrics = _upgrade(metrics, version, suite.specs)
    for spec in suite.specs:
        for item in spec.fields:
            problem = check_field(
                item, metrics, allow_null=item.since > version and item.legacy is None
            )
            if problem is not None:
                raise fail(problem)
    for cls in suite.trackers:
        check = getattr(cls, "check", None)
        problem = check(metrics) if callable(check) else None
        if problem is not None:
            raise fail(problem)
    return metrics


def _upgrade(
    metrics: dict[str, Any], version: int, specs: tuple[Any, ...] = METRIC_SPECS
) -> dict[str, Any]:
    """A file of layout ``version`` with the ``legacy`` value of every field it predates
    (those keys first, as a new dict; nested fields added to a copy of their object)."""
    newer = [f for spec in specs for f in spec.fields if f.since > version]
    out = {f.name: f.legacy for f in newer if "." not in f.name}
    out.update(metrics)
    for item in newer:
        parent, _, leaf = item.name.rpartition(".")
        if parent:
            holder = out.get(parent)
            if isinstance(holder, dict) and leaf not in holder:
                out[parent] = {**holder, leaf: item.legacy}
    return out


def validate_metrics(metrics: Any, where: str = "metrics") -> dict[str, Any]:
    """Check a per-episode metrics dict of our layout against :data:`METRIC_SPECS`.

    Types, ranges (e.g. ``collision_rate`` in [0, 1], ``motion_jerk_m_s3 >= 0``), choices
    (category, difficulty, ended_by, rules, token source) and the cross-field rules
    (``active_stop`` iff ``ended_by == "stop"``, counts not above their totals, FindSR
    implies GeoFindSR, body-group keys) are checked. A file of an older layout gets the
    ``legacy`` value of every field it predates (``MetricField.since``): a
    ``humanclaw_metrics_v1`` file is read as scored by the ``strict`` rules, with
    ``motion_anomaly`` unknown (``null``).
    A dict with ``"imported_from"`` (a row read from the reference layout, see
    :mod:`humanclaw_gym.metrics.formats`) may have ``null`` in the fields that layout does
    not record.

    Args:
        metrics: a parsed metrics.json.
        where: what to name in errors (usually the file path).

    Returns:
        The metrics with every declared field (a new dict for an older layout).

    Raises:
        MetricsFileError: naming ``where`` and the offending field.
    """

    def fail(message: str) -> MetricsFileError:
        return MetricsFileError(f"{where}: {message}")

    if not isinstance(metrics, dict):
        raise fail(f"expected a JSON object, got {type(metrics).__name__}")
    if metrics.get("schema") not in METRICS_SCHEMAS:
        suite = suite_for_schema(metrics.get("schema"))
        if suite is None:
            raise fail(
                f"schema must be one of {METRICS_SCHEMAS} or the metrics layout of a "
                f"registered task, got {metrics.get('schema')!r}"
            )
        return _validate_suite(metrics, suite, fail)
    version = schema_version(metrics["schema"]) or METRICS_VERSION
    if version < METRICS_VERSION:
        metrics = _upgrade(metrics, version)
    imported = metrics.get("imported_from") is not None
    for spec in METRIC_SPECS:
        for item in spec.fields:
            unrecorded = (imported and not item.in_reference_layout) or (
                item.since > version and item.legacy is None
            )
            problem = check_field(item, metrics, allow_null=unrecorded)
            if problem is not None:
                raise fail(problem)
    for key in ("episode_id", "scene_id"):
        if not metrics[key]:
            raise fail(f"{key} must be a non-empty string")
    problem = OutcomeMetric.check(metrics)
    if problem is not None:
        raise fail(problem)
    for flag, needs in (
        ("find_success", "geo_find_success"),
        ("nav_success_20cm", "active_stop"),
        ("nav_success_1m", "active_stop"),
        ("interact_success", "active_stop"),
    ):
        if metrics.get(flag) and not metrics[needs]:
            raise fail(f"{flag} is true but {needs} is false")
    for name in ("collision_rate_by_group", "collision_steps_by_group"):
        groups = field_value(metrics, name)
        if groups is not None and set(groups) != set(BODY_GROUPS):
            raise fail(f"{name} must map exactly {tuple(BODY_GROUPS)}, got {sorted(groups)}")
    if metrics["motion_steps"] > 0 and metrics["collision_rate"] is None:
        raise fail("collision_rate must be a number when motion_steps > 0, got null")
    if metrics["motion_steps"] > 0 and not math.isclose(
        metrics["collision_rate"], metrics["collision_steps"] / metrics["motion_steps"]
    ):
        raise fail(
            f"collision_rate {metrics['collision_rate']!r} is not collision_steps / "
            f"motion_steps = {metrics['collision_steps']} / {metrics['motion_steps']}"
        )
    if metrics["motion_steps"] == 0 and metrics["rules"] == "paper":
        if metrics["collision_rate"] != 0.0:
            raise fail(
                "collision_rate must be 0.0 without motion under paper rules, "
                f"got {metrics['collision_rate']!r}"
            )
    if (metrics.get("motion_anomaly") or 0) > 0 and metrics["max_joint_tracking_error_deg"] is None:
        raise fail("motion_anomaly > 0 needs a max_joint_tracking_error_deg")
    if metrics["floor_source"] != "spawn_raycast" and metrics["rules"] == "strict":
        raise fail(f"floor_source {metrics['floor_source']!r} is not allowed under strict rules")
    return metrics
