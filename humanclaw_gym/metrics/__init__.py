"""Paper metrics of the HumanClaw benchmark: pure functions, per-episode recorder, aggregation.

Nothing here simulates or renders: the functions read contact rows, poses, pixel counts and
text that the environment hands over, and the recorder turns one episode's events into one
``metrics.json`` (schema ``humanclaw_metrics_v2``) through the trackers of
:data:`TRACKERS` (one :class:`Tracker` per part of the file, see
:mod:`humanclaw_gym.metrics.tracker`). :func:`aggregate_metric_files` reduces a
directory of those files (ours or the reference release's layout) to the paper table. Two
rule sets exist (:mod:`humanclaw_gym.metrics.rules`): ``paper`` (default, the reference
release bit for bit) and ``strict``. See ``docs/metrics.md`` for every definition.
"""

from __future__ import annotations

from humanclaw_gym.metrics.aggregate import (
    BREAKDOWN_COLUMNS,
    EXTRA_COLUMNS,
    MAIN_COLUMNS,
    SUMMARY_SCHEMA,
    VARIANT_COLUMNS,
    aggregate,
    aggregate_metric_files,
    declared_columns,
    find_metric_files,
    format_tables,
    read_metric_files,
)
from humanclaw_gym.metrics.collision import (
    FLOOR_SOURCES,
    CollisionTracker,
    collision_body_group,
    collision_contact_mask,
    episode_floor,
    initial_penetration,
    is_collision_contact,
    spawn_floor_height,
)
from humanclaw_gym.metrics.disturbance import DisturbanceTracker
from humanclaw_gym.metrics.episode import (
    ENDED_BY,
    METRIC_SPECS,
    METRICS_SCHEMA,
    METRICS_SCHEMAS,
    EpisodeMetricRecorder,
    MetricsFileError,
    validate_metrics,
    write_metrics_json,
)
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.find import (
    NEGATION_WORDS,
    PAPER_ALIASES,
    PAPER_NEGATION_WORDS,
    FindTracker,
    category_aliases,
    claims_target_visible,
)
from humanclaw_gym.metrics.formats import (
    REFERENCE_SCHEMA,
    REFERENCE_SUMMARY_SCHEMA,
    read_metrics_record,
    reference_rollout_dir,
    summary_to_reference_layout,
    to_reference_layout,
)
from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance, point_aabb_distance
from humanclaw_gym.metrics.interact import (
    InteractTracker,
    interact_target_ids,
    pelvis_target_contact,
    scene_object_handles,
)
from humanclaw_gym.metrics.jerk import motion_jerk, moving_average, root_rigid_joint_positions
from humanclaw_gym.metrics.outcome import OutcomeMetric
from humanclaw_gym.metrics.plot import plot_success_breakdown
from humanclaw_gym.metrics.rules import (
    DEFAULT_METRIC_RULES,
    METRIC_RULES,
    RULES,
    RuleDifference,
    check_rules,
)
from humanclaw_gym.metrics.thresholds import (
    COLLISION_MIN_HEIGHT_M,
    FIND_PIXEL_THRESHOLD,
    FLOOR_SELECT_EPSILON_M,
    INITIAL_PENETRATION_FLAG_M,
    INTERACT_CATEGORIES,
    JERK_FPS,
    JERK_STRIDE,
    JERK_WINDOW,
    MOTION_ANOMALY_BOUND_DEG,
    NAV_DISTANCE_M,
    NAV_RELAXED_DISTANCE_M,
)
from humanclaw_gym.metrics.tracker import (
    TRACKER_NEEDS,
    DecisionRecord,
    EpisodeEnd,
    EpisodeFacts,
    EpisodeStart,
    FrameRecord,
    Tracker,
)
from humanclaw_gym.metrics.trackers import (
    BENCHMARK_SUITE,
    METRIC_NEEDS,
    THRESHOLDS,
    TRACKERS,
    MetricSuite,
    suite_for_schema,
    suite_for_spec,
)
from humanclaw_gym.metrics.tracking import (
    MotionAnomalyTracker,
    head_roll_rad,
    joint_tracking_error_rad,
    pelvis_frame_positions,
)
from humanclaw_gym.metrics.usage import TOKEN_SOURCE_LABELS, UsageTracker, combine_token_sources

__all__ = [
    "TRACKERS",
    "TRACKER_NEEDS",
    "METRIC_NEEDS",
    "THRESHOLDS",
    "BENCHMARK_SUITE",
    "MetricSuite",
    "OutcomeMetric",
    "suite_for_schema",
    "suite_for_spec",
    "Tracker",
    "EpisodeFacts",
    "EpisodeStart",
    "DecisionRecord",
    "FrameRecord",
    "EpisodeEnd",
    "pelvis_frame_positions",
    "joint_tracking_error_rad",
    "head_roll_rad",
    "MotionAnomalyTracker",
    "MOTION_ANOMALY_BOUND_DEG",
    "BREAKDOWN_COLUMNS",
    "COLLISION_MIN_HEIGHT_M",
    "DEFAULT_METRIC_RULES",
    "ENDED_BY",
    "EXTRA_COLUMNS",
    "FIND_PIXEL_THRESHOLD",
    "FLOOR_SELECT_EPSILON_M",
    "FLOOR_SOURCES",
    "INITIAL_PENETRATION_FLAG_M",
    "INTERACT_CATEGORIES",
    "JERK_FPS",
    "JERK_STRIDE",
    "JERK_WINDOW",
    "MAIN_COLUMNS",
    "METRICS_SCHEMA",
    "METRICS_SCHEMAS",
    "METRIC_RULES",
    "METRIC_SPECS",
    "NAV_DISTANCE_M",
    "NAV_RELAXED_DISTANCE_M",
    "NEGATION_WORDS",
    "PAPER_ALIASES",
    "PAPER_NEGATION_WORDS",
    "REFERENCE_SCHEMA",
    "REFERENCE_SUMMARY_SCHEMA",
    "RULES",
    "SUMMARY_SCHEMA",
    "TOKEN_SOURCE_LABELS",
    "VARIANT_COLUMNS",
    "CollisionTracker",
    "Column",
    "DisturbanceTracker",
    "EpisodeMetricRecorder",
    "FindTracker",
    "InteractTracker",
    "MetricField",
    "MetricSpec",
    "MetricsFileError",
    "Reduce",
    "RuleDifference",
    "UsageTracker",
    "aggregate",
    "aggregate_metric_files",
    "body_to_target_aabb_distance",
    "category_aliases",
    "check_rules",
    "claims_target_visible",
    "collision_body_group",
    "collision_contact_mask",
    "combine_token_sources",
    "declared_columns",
    "episode_floor",
    "find_metric_files",
    "format_tables",
    "initial_penetration",
    "interact_target_ids",
    "is_collision_contact",
    "motion_jerk",
    "moving_average",
    "pelvis_target_contact",
    "plot_success_breakdown",
    "point_aabb_distance",
    "read_metric_files",
    "read_metrics_record",
    "reference_rollout_dir",
    "root_rigid_joint_positions",
    "scene_object_handles",
    "spawn_floor_height",
    "summary_to_reference_layout",
    "to_reference_layout",
    "validate_metrics",
    "write_metrics_json",
]
