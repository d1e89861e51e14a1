"""The per-episode metric recorder and the ``metrics.json`` schema (``humanclaw_metrics_v1``).

:class:`EpisodeMetricRecorder` is fed by the environment's metrics wrapper while an episode
runs and produces one JSON-ready dict at the end. Event order for one episode::

    rec = EpisodeMetricRecorder(...)                      # after reset: floor, penetration known
    for each decision step s = 0, 1, ...:
        rec.record_decision(s, target_pixels, visible_state, skill, usage)
        if skill is not Stop:
            rec.record_generated_chunk(s, frames_75)      # the 15 generated frames
            for i in range(15):                           # the realized frames, in order
                rec.record_frame(s, skill, i, i == 14, contacts, object_ids, object_positions)
    metrics = rec.finalize(final_body_points, ended_by)   # "stop" | "truncated" | "error"
    write_metrics_json(run_dir / "metrics.json", metrics)

Contact rows are consumed immediately and never stored; the recorder keeps only small
counters, step sets, per-object positions and the generated frames (for Motion Jerk).

The content of metrics.json is declared field by field by :data:`METRIC_SPECS` (one
:class:`~humanclaw_gym.metrics.fields.MetricSpec` per metric part); :func:`validate_metrics`
checks a file against those declarations. A new tracker adds its spec to that tuple and its
summary to :meth:`EpisodeMetricRecorder.finalize`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.body.skeleton import BODY_GROUPS, FRAME_DIM
from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS
from humanclaw_gym.fileio import write_text_atomic
from humanclaw_gym.metrics._checks import (
    as_contacts,
    as_finite_float,
    as_id_set,
    as_int,
    as_skill,
    check_human_links,
    check_object_positions,
)
from humanclaw_gym.metrics.collision import COLLISION_SPEC, CollisionTracker
from humanclaw_gym.metrics.disturbance import DISTURBANCE_SPEC, DisturbanceTracker
from humanclaw_gym.metrics.fields import (
    Column,
    MetricField,
    MetricSpec,
    Reduce,
    check_field,
    field_value,
)
from humanclaw_gym.metrics.find import FIND_SPEC, FindTracker
from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance
from humanclaw_gym.metrics.interact import INTERACT_SPEC, InteractTracker
from humanclaw_gym.metrics.jerk import JERK_SPEC, motion_jerk
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, METRIC_RULES, check_rules
from humanclaw_gym.metrics.thresholds import (
    COLLISION_MIN_HEIGHT_M,
    FIND_PIXEL_THRESHOLD,
    INITIAL_PENETRATION_FLAG_M,
    JERK_FPS,
    JERK_STRIDE,
    JERK_WINDOW,
    MOTION_ANOMALY_BOUND_DEG,
    NAV_DISTANCE_M,
    NAV_RELAXED_DISTANCE_M,
)
from humanclaw_gym.metrics.tracking import ANOMALY_SPEC, MotionAnomalyTracker
from humanclaw_gym.metrics.usage import USAGE_SPEC, UsageTracker
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES
from humanclaw_gym.skills import Skill

if TYPE_CHECKING:
    from humanclaw_gym.policy import Usage

__all__ = [
    "ENDED_BY",
    "METRICS_SCHEMA",
    "METRICS_SCHEMAS",
    "METRIC_SPECS",
    "EpisodeMetricRecorder",
    "MetricsFileError",
    "validate_metrics",
    "write_metrics_json",
]

#: Schema tag of every per-episode metrics.json we write.
METRICS_SCHEMA = "humanclaw_metrics_v2"

#: Schema tags of our layout that are read: v1 files (before the rules setting) were scored
#: by what are now the ``strict`` rules and are read as such.
METRICS_SCHEMAS: tuple[str, ...] = ("humanclaw_metrics_v1", METRICS_SCHEMA)

#: How an episode can end: the policy's Stop, the step limit, or an error.
ENDED_BY: tuple[str, ...] = ("stop", "truncated", "error")


class MetricsFileError(ValueError):
    """A metrics dict or file does not follow the ``humanclaw_metrics_v2`` schema (or a
    layout that is read, see :mod:`humanclaw_gym.metrics.formats`)."""


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
    """Collects every paper metric of one episode from decision, chunk and frame events.

    Args:
        episode_id: episode identifier.
        scene_id: scene identifier.
        category: target category (``"chair"``, ``"couch"``, ...); also the name the FindSR
            text rule looks for (with its aliases).
        target_ids: scene object ids of the resolved target instances (>= 1).
        target_aabbs: ``(K, 2, 3)`` world AABBs of the target instances (min, max corners),
            metres, one per id in ``target_ids``.
        interact: whether this is an interact (sit) episode.
        dynamic_ids: ids of the scene's movable objects.
        floor_height_m: the episode floor, world y in metres (see
            :func:`~humanclaw_gym.metrics.collision.spawn_floor_height`).
        initial_penetration_m: deepest humanoid penetration of the reset-time contact query,
            metres (see :func:`~humanclaw_gym.metrics.collision.initial_penetration`).
        difficulty: the episode's difficulty label, if any.
        rules: the metric rules, ``"paper"`` (default) or ``"strict"`` (see
            :mod:`humanclaw_gym.metrics.rules`); recorded in the result.
        floor_source: where ``floor_height_m`` came from (see
            :func:`~humanclaw_gym.metrics.collision.episode_floor`).
        rollout_index: how many times this episode ran before in the same output (0 for
            the first rollout); with ``episode_id`` it identifies the rollout.
        object_handles: Habitat instance handles of the scene's objects
            (:func:`~humanclaw_gym.metrics.interact.scene_object_handles`); under ``paper``
            rules Interact also counts objects sharing a target's template.
        link_names: the humanoid's link names in the order of the contacts' ``link_a``
            (a body asset's links, which also name the collision body groups); None: the
            skeleton's joints.
    """

    def __init__(
        self,
        episode_id: str,
        scene_id: str,
        category: str,
        target_ids: Sequence[int],
        target_aabbs: np.ndarray,
        interact: bool,
        dynamic_ids: Sequence[int],
        floor_height_m: float,
        initial_penetration_m: float,
        difficulty: str | None = None,
        rules: str = DEFAULT_METRIC_RULES,
        floor_source: str = "spawn_raycast",
        rollout_index: int = 0,
        object_handles: Mapping[int, str] | None = None,
        link_names: Sequence[str] | None = None,
    ) -> None:
        rules = check_rules(rules)
        rollout_index = as_int(rollout_index, "rollout_index", 0)
        for name, value in (
            ("episode_id", episode_id),
            ("scene_id", scene_id),
            ("category", category),
        ):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if category not in TARGET_CATEGORIES:
            raise ValueError(f"category must be one of {TARGET_CATEGORIES}, got {category!r}")
        if difficulty is not None and difficulty not in DIFFICULTY_LABELS:
            raise ValueError(
                f"difficulty must be one of {DIFFICULTY_LABELS} or None, got {difficulty!r}"
            )
        if not isinstance(interact, (bool, np.bool_)):
            raise ValueError(f"interact must be a bool, got {interact!r}")
        ids = [as_int(v, f"target_ids[{i}]", 1) for i, v in enumerate(target_ids)]
        if not ids:
            raise ValueError("target_ids must contain at least one object id")
        aabbs = np.asarray(target_aabbs, dtype=np.float64)
        if aabbs.shape != (len(ids), 2, 3):
            raise ValueError(
                f"target_aabbs must have shape ({len(ids)}, 2, 3) (one box per target id), "
                f"got {aabbs.shape}"
            )
        body_to_target_aabb_distance(np.zeros((1, 3)), aabbs)  # validates the boxes
        penetration = as_finite_float(initial_penetration_m, "initial_penetration_m")
        if penetration < 0:
            raise ValueError(f"initial_penetration_m must be >= 0, got {initial_penetration_m!r}")

        self.rules = rules
        self.rollout_index = rollout_index
        self.episode_id = episode_id
        self.scene_id = scene_id
        self.category = category
        self.difficulty = difficulty
        self.interact = bool(interact)
        self.target_ids = tuple(ids)
        self._target_aabbs = aabbs.copy()
        self.dynamic_ids = tuple(sorted(as_id_set(dynamic_ids, "dynamic_ids")))
        self.initial_penetration_m = penetration

        self._find = FindTracker([category], rules=rules)
        self._collision = CollisionTracker(
            self.dynamic_ids,
            floor_height_m,
            rules=rules,
            floor_source=floor_source,
            link_names=link_names,
        )
        self._disturbance = DisturbanceTracker(self.dynamic_ids)
        self._interact = InteractTracker(self.target_ids, object_handles, rules=rules)
        self._usage = UsageTracker(rules=rules)
        self._anomaly = MotionAnomalyTracker()

        self._steps = 0
        self._last_step: int | None = None
        self._last_skill: Skill | None = None
        self._stopped = False
        self._chunks: list[np.ndarray] = []
        self._chunk_steps: set[int] = set()
        self._next_frame_index = 0
        self._chunk_closed = False
        self._result: dict[str, Any] | None = None

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
        as_int(target_pixels, "target_pixels", 0)
        if visible_state is not None and not isinstance(visible_state, str):
            raise ValueError(f"visible_state must be a str or None, got {visible_state!r}")
        self._usage.record(usage)
        self._find.record(step, target_pixels, visible_state)
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
        self._chunks.append(self._check_generated(frames_75, "frames_75"))
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
        return frames

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
        self._check_open()
        step = self._check_motion_step(step, "record_frame")
        skill = as_skill(skill)
        if skill != self._last_skill:
            raise ValueError(
                f"record_frame: skill {skill.name} differs from the decision's {self._last_skill.name}"
            )
        if self._chunk_closed:
            raise ValueError(f"record_frame: step {step} already received its last_in_chunk frame")
        index = as_int(frame_index, "frame_index", 0)
        if index != self._next_frame_index:
            raise ValueError(
                f"frame_index must be {self._next_frame_index} (frames arrive in order), got {index}"
            )
        rows = as_contacts(contacts)
        # Reject bad input before any tracker changes state.
        check_human_links(rows, len(self._collision.link_names))
        object_ids = list(object_ids)
        check_object_positions(object_ids, object_positions)
        if step not in self._chunk_steps:
            raise ValueError(
                f"record_frame: step {step} has no generated chunk (call record_generated_chunk "
                "before its frames)"
            )
        chunk = self._chunks[-1]
        if index >= len(chunk):
            raise ValueError(
                f"frame_index must be < {len(chunk)} (the generated chunk's length), got {index}"
            )
        realized = np.asarray(realized_75, dtype=np.float64)
        if realized.shape != (FRAME_DIM,) or not np.all(np.isfinite(realized)):
            raise ValueError(
                f"realized_75 must be a finite ({FRAME_DIM},) frame, got shape {realized.shape}"
            )
        self._anomaly.record_frame(chunk[index], realized)
        self._collision.record_frame(step, rows)
        self._disturbance.record_frame(rows, object_ids, object_positions)
        self._interact.record_frame(step, skill, rows, bool(last_in_chunk))
        self._next_frame_index += 1
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
            JSON-ready dict with ``"schema": "humanclaw_metrics_v2"``; its fields are declared
            by :data:`METRIC_SPECS`.
        """
        self._check_open()
        if ended_by not in ENDED_BY:
            raise ValueError(f"ended_by must be one of {ENDED_BY}, got {ended_by!r}")
        if ended_by == "stop" and not self._stopped:
            raise ValueError("ended_by='stop' but no Stop decision was recorded")
        if ended_by == "truncated" and self._stopped:
            raise ValueError("ended_by='truncated' but the policy chose Stop")
        active_stop = ended_by == "stop"
        distance = body_to_target_aabb_distance(final_body_points, self._target_aabbs)
        generated = np.concatenate(self._chunks) if self._chunks else np.zeros((0, FRAME_DIM))
        jerk = motion_jerk(generated) if len(generated) else None
        collision = self._collision.summary()
        tokens = self._usage.summary()
        steps = self._steps
        result: dict[str, Any] = {
            "schema": METRICS_SCHEMA,
            "rules": self.rules,
            "episode_id": self.episode_id,
            "scene_id": self.scene_id,
            "rollout_index": self.rollout_index,
            "category": self.category,
            "difficulty": self.difficulty,
            "interact": self.interact,
            "target_ids": list(self.target_ids),
            "ended_by": ended_by,
            "active_stop": active_stop,
            "steps": steps,
            **self._find.summary(),
            "final_distance_m": distance,
            "nav_success_20cm": bool(active_stop and distance <= NAV_DISTANCE_M),
            "geo_nav_success_20cm": bool(distance <= NAV_DISTANCE_M),
            "nav_success_1m": bool(active_stop and distance < NAV_RELAXED_DISTANCE_M),
            **self._interact.summary(active_stop, self.interact),
            **collision,
            **self._disturbance.summary(),
            "motion_jerk_m_s3": jerk,
            **self._anomaly.summary(),
            "generated_frames": int(len(generated)),
            "initial_penetration_m": self.initial_penetration_m,
            "initial_penetration_flag": bool(
                self.initial_penetration_m > INITIAL_PENETRATION_FLAG_M
            ),
            "tokens": {
                **tokens,
                "input_tokens_per_step": tokens["input_tokens"] / steps if steps else None,
                "output_tokens_per_step": tokens["output_tokens"] / steps if steps else None,
            },
            "thresholds": {
                "find_pixels": FIND_PIXEL_THRESHOLD,
                "nav_distance_m": NAV_DISTANCE_M,
                "nav_relaxed_distance_m": NAV_RELAXED_DISTANCE_M,
                "collision_min_height_m": COLLISION_MIN_HEIGHT_M,
                "initial_penetration_flag_m": INITIAL_PENETRATION_FLAG_M,
                "jerk_fps": JERK_FPS,
                "jerk_stride": JERK_STRIDE,
                "jerk_window": JERK_WINDOW,
                "motion_anomaly_bound_deg": MOTION_ANOMALY_BOUND_DEG,
            },
        }
        self._result = result
        return result


# -- declared fields and the schema check ------------------------------------------------

#: Identity and outcome of the episode.
EPISODE_SPEC = MetricSpec(
    name="episode",
    fields=(
        MetricField("schema", "str", "layout version", choices=METRICS_SCHEMAS),
        MetricField(
            "rules", "str", "metric rules the episode was scored with", choices=METRIC_RULES
        ),
        MetricField("episode_id", "str", "the episode"),
        MetricField("scene_id", "str", "its scene"),
        MetricField(
            "rollout_index",
            "int",
            "earlier rollouts of this episode in the same output; (episode_id, rollout_index) "
            "is unique in an aggregation",
            minimum=0,
        ),
        MetricField(
            "category", "str", "target category", choices=TARGET_CATEGORIES, aggregate="breakdown"
        ),
        MetricField(
            "difficulty",
            "str",
            "difficulty label",
            choices=DIFFICULTY_LABELS,
            nullable=True,
            imported=False,
            aggregate="breakdown (null: unlabelled)",
        ),
        MetricField("interact", "bool", "the episode ends with sitting on the target"),
        MetricField("target_ids", "int_list", "object ids of the target instances", imported=False),
        MetricField("ended_by", "str", "how the episode ended", choices=ENDED_BY),
        MetricField("active_stop", "bool", "the policy chose Stop (ended_by is stop)"),
        MetricField(
            "steps",
            "int",
            "decision steps including the Stop",
            unit="steps",
            minimum=0,
            aggregate="avg steps: mean over episodes; the tokens-per-step denominator",
        ),
    ),
    columns=(Column("avg steps", "avg_steps", "main", ".1f", Reduce("mean", "steps"), 7),),
)

#: Final distance and the Nav flags.
NAV_SPEC = MetricSpec(
    name="nav",
    fields=(
        MetricField(
            "final_distance_m",
            "number",
            "final body-to-target-box distance",
            unit="m",
            minimum=0.0,
        ),
        MetricField(
            "nav_success_20cm",
            "bool",
            "NavSR@20cm: active stop within 0.2 m",
            aggregate="NavSR@20cm: share of all episodes",
        ),
        MetricField(
            "geo_nav_success_20cm",
            "bool",
            "GeoNavSR@20cm: within 0.2 m however it ended",
            aggregate="GeoNavSR@20cm: share of all episodes",
        ),
        MetricField(
            "nav_success_1m",
            "bool",
            "NavSR@1m: active stop closer than 1 m",
            aggregate="NavSR@1m: share of all episodes",
        ),
    ),
    columns=(
        Column(
            "NavSR@20cm",
            "nav_sr_20cm_pct",
            "main",
            ".1f",
            Reduce("share", "nav_success_20cm", scale=100.0),
            1,
            True,
        ),
        Column(
            "GeoNavSR@20cm",
            "geo_nav_sr_20cm_pct",
            "variants",
            ".1f",
            Reduce("share", "geo_nav_success_20cm", scale=100.0),
            1,
            True,
        ),
        Column(
            "NavSR@1m",
            "nav_sr_1m_pct",
            "variants",
            ".1f",
            Reduce("share", "nav_success_1m", scale=100.0),
            2,
            True,
        ),
    ),
)

#: The reset-time penetration diagnostic.
PENETRATION_SPEC = MetricSpec(
    name="penetration",
    fields=(
        MetricField(
            "initial_penetration_m",
            "number",
            "deepest humanoid penetration at reset",
            unit="m",
            minimum=0.0,
        ),
        MetricField(
            "initial_penetration_flag",
            "bool",
            "initial penetration above 0.01 m (diagnostic only)",
            aggregate="counted",
        ),
        MetricField("thresholds", "object", "the constants used", imported=False),
    ),
)

#: Every declared part of metrics.json, in the order of the paper's table. A new tracker
#: appends its :class:`~humanclaw_gym.metrics.fields.MetricSpec` here.
METRIC_SPECS: tuple[MetricSpec, ...] = (
    EPISODE_SPEC,
    FIND_SPEC,
    NAV_SPEC,
    INTERACT_SPEC,
    COLLISION_SPEC,
    DISTURBANCE_SPEC,
    JERK_SPEC,
    ANOMALY_SPEC,
    PENETRATION_SPEC,
    USAGE_SPEC,
)

# Fields added by humanclaw_metrics_v2, with the value a v1 file (strict rules) stands for.
_V1_DEFAULTS: dict[str, Any] = {
    "rules": "strict",
    "rollout_index": 0,
    "floor_source": "spawn_raycast",
    "motion_anomaly": None,
    "max_joint_tracking_error_deg": None,
}


def _upgrade_v1(metrics: dict[str, Any]) -> dict[str, Any]:
    out = {**_V1_DEFAULTS, **metrics}
    tokens = out.get("tokens")
    if isinstance(tokens, dict) and "failed_calls" not in tokens:
        out["tokens"] = {**tokens, "failed_calls": 0}
    return out


def validate_metrics(metrics: Any, where: str = "metrics") -> dict[str, Any]:
    """Check a per-episode metrics dict of our layout against :data:`METRIC_SPECS`.

    Types, ranges (e.g. ``collision_rate`` in [0, 1], ``motion_jerk_m_s3 >= 0``), choices
    (category, difficulty, ended_by, rules, token source) and the cross-field rules
    (``active_stop`` iff ``ended_by == "stop"``, counts not above their totals, FindSR
    implies GeoFindSR, body-group keys) are checked. A ``humanclaw_metrics_v1`` file is
    read as scored by the ``strict`` rules (its missing v2 fields get their v1 meaning).
    A dict with ``"imported_from"`` (a row read from the reference layout, see
    :mod:`humanclaw_gym.metrics.formats`) may have ``null`` in the fields that layout does
    not record.

    Args:
        metrics: a parsed metrics.json.
        where: what to name in errors (usually the file path).

    Returns:
        The metrics as a v2 dict (a new dict for a v1 file).

    Raises:
        MetricsFileError: naming ``where`` and the offending field.
    """

    def fail(message: str) -> MetricsFileError:
        return MetricsFileError(f"{where}: {message}")

    if not isinstance(metrics, dict):
        raise fail(f"expected a JSON object, got {type(metrics).__name__}")
    if metrics.get("schema") not in METRICS_SCHEMAS:
        raise fail(f"schema must be one of {METRICS_SCHEMAS}, got {metrics.get('schema')!r}")
    legacy = metrics["schema"] != METRICS_SCHEMA
    if legacy:
        metrics = _upgrade_v1(metrics)
    imported = metrics.get("imported_from") is not None
    for spec in METRIC_SPECS:
        for item in spec.fields:
            unrecorded = (imported and not item.imported) or (
                legacy and item.name in _V1_DEFAULTS and _V1_DEFAULTS[item.name] is None
            )
            problem = check_field(item, metrics, allow_null=unrecorded)
            if problem is not None:
                raise fail(problem)
    for key in ("episode_id", "scene_id"):
        if not metrics[key]:
            raise fail(f"{key} must be a non-empty string")
    if metrics["active_stop"] != (metrics["ended_by"] == "stop"):
        raise fail(
            f"active_stop ({metrics['active_stop']}) must be true exactly when ended_by is "
            f"'stop' (ended_by={metrics['ended_by']!r})"
        )
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
