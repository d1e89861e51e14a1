"""Nav metrics: how close the final body is to the target, and whether the policy stopped there.

The final distance is the smallest distance from any point of the final realized body
(pelvis, articulated root, every link origin) to any target instance's world AABB
(:func:`~humanclaw_gym.metrics.geometry.body_to_target_aabb_distance`). NavSR@20cm needs an
active stop within :data:`~humanclaw_gym.metrics.thresholds.NAV_DISTANCE_M`, GeoNavSR@20cm
the distance alone, NavSR@1m an active stop closer than
:data:`~humanclaw_gym.metrics.thresholds.NAV_RELAXED_DISTANCE_M`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance
from humanclaw_gym.metrics.thresholds import NAV_DISTANCE_M, NAV_RELAXED_DISTANCE_M
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord

__all__ = ["NAV_SPEC", "NavMetric"]

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
            upstream="success.final_body_target_aabb_distance_m",
        ),
        MetricField(
            "nav_success_20cm",
            "bool",
            "NavSR@20cm: active stop within 0.2 m",
            aggregate="NavSR@20cm: share of all episodes",
            upstream="success.nav_sr_20cm",
        ),
        MetricField(
            "geo_nav_success_20cm",
            "bool",
            "GeoNavSR@20cm: within 0.2 m however it ended",
            aggregate="GeoNavSR@20cm: share of all episodes",
            upstream="success.geo_nav_sr_20cm",
        ),
        MetricField(
            "nav_success_1m",
            "bool",
            "NavSR@1m: active stop closer than 1 m",
            aggregate="NavSR@1m: share of all episodes",
            upstream="success.nav_sr_1m",
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


class NavMetric:
    """Tracker of the final distance and the Nav flags (:data:`NAV_SPEC`)."""

    spec: ClassVar[MetricSpec] = NAV_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {
        "nav_distance_m": NAV_DISTANCE_M,
        "nav_relaxed_distance_m": NAV_RELAXED_DISTANCE_M,
    }

    def on_reset(self, start: EpisodeStart) -> None:
        self._aabbs = start.target_aabbs

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        pass

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        distance = body_to_target_aabb_distance(end.final_body_points, self._aabbs)
        active_stop = end.active_stop
        return {
            "final_distance_m": distance,
            "nav_success_20cm": bool(active_stop and distance <= NAV_DISTANCE_M),
            "geo_nav_success_20cm": bool(distance <= NAV_DISTANCE_M),
            "nav_success_1m": bool(active_stop and distance < NAV_RELAXED_DISTANCE_M),
        }
