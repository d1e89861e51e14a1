"""Paper metrics of the HumanClaw benchmark: pure functions, per-episode recorder, aggregation.

Nothing here simulates or renders: the functions read contact rows, poses, pixel counts and
text that the environment hands over, and the recorder turns one episode's events into one
``metrics.json`` (schema ``humanclaw_metrics_v2``). :func:`aggregate_metric_files` reduces a
directory of those files to the paper table. See ``docs/metrics.md`` for every definition.
"""

from __future__ import annotations

from humanclaw_gym.metrics.aggregate import (
    BREAKDOWN_COLUMNS,
    MAIN_COLUMNS,
    SUMMARY_SCHEMA,
    VARIANT_COLUMNS,
    aggregate,
    aggregate_metric_files,
    find_metric_files,
    format_tables,
)
from humanclaw_gym.metrics.collision import (
    CollisionTracker,
    collision_contact_mask,
    initial_penetration,
    is_collision_contact,
    spawn_floor_height,
)
from humanclaw_gym.metrics.disturbance import DisturbanceTracker
from humanclaw_gym.metrics.episode import (
    ENDED_BY,
    METRICS_SCHEMA,
    METRICS_SCHEMA_V1,
    EpisodeMetricRecorder,
    MetricsFileError,
    validate_metrics,
    write_metrics_json,
)
from humanclaw_gym.metrics.find import (
    NEGATION_WORDS,
    FindTracker,
    category_aliases,
    claims_target_visible,
)
from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance, point_aabb_distance
from humanclaw_gym.metrics.interact import InteractTracker, pelvis_target_contact
from humanclaw_gym.metrics.jerk import motion_jerk, moving_average, root_rigid_joint_positions
from humanclaw_gym.metrics.plot import plot_success_breakdown
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
from humanclaw_gym.metrics.tracking import (
    MotionAnomalyTracker,
    head_roll_rad,
    joint_tracking_error_rad,
    pelvis_frame_positions,
)
from humanclaw_gym.metrics.usage import TOKEN_SOURCE_LABELS, UsageTracker, combine_token_sources

__all__ = [
    "BREAKDOWN_COLUMNS",
    "COLLISION_MIN_HEIGHT_M",
    "ENDED_BY",
    "FIND_PIXEL_THRESHOLD",
    "FLOOR_SELECT_EPSILON_M",
    "INITIAL_PENETRATION_FLAG_M",
    "INTERACT_CATEGORIES",
    "JERK_FPS",
    "JERK_STRIDE",
    "JERK_WINDOW",
    "MAIN_COLUMNS",
    "METRICS_SCHEMA",
    "METRICS_SCHEMA_V1",
    "MOTION_ANOMALY_BOUND_DEG",
    "NAV_DISTANCE_M",
    "NAV_RELAXED_DISTANCE_M",
    "NEGATION_WORDS",
    "SUMMARY_SCHEMA",
    "TOKEN_SOURCE_LABELS",
    "VARIANT_COLUMNS",
    "CollisionTracker",
    "DisturbanceTracker",
    "EpisodeMetricRecorder",
    "FindTracker",
    "InteractTracker",
    "MetricsFileError",
    "MotionAnomalyTracker",
    "UsageTracker",
    "aggregate",
    "aggregate_metric_files",
    "body_to_target_aabb_distance",
    "category_aliases",
    "claims_target_visible",
    "collision_contact_mask",
    "combine_token_sources",
    "find_metric_files",
    "format_tables",
    "head_roll_rad",
    "initial_penetration",
    "is_collision_contact",
    "joint_tracking_error_rad",
    "motion_jerk",
    "moving_average",
    "pelvis_frame_positions",
    "pelvis_target_contact",
    "plot_success_breakdown",
    "point_aabb_distance",
    "root_rigid_joint_positions",
    "spawn_floor_height",
    "validate_metrics",
    "write_metrics_json",
]
