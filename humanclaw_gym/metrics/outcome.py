"""The episode part of metrics.json: which episode, scored how, and how it ended."""

from __future__ import annotations

from typing import Any, ClassVar

from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import METRIC_RULES
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

__all__ = ["ENDED_BY", "EPISODE_SPEC", "EpisodeMetric"]

#: How an episode can end: the policy's Stop, the step limit, or an error.
ENDED_BY: tuple[str, ...] = ("stop", "truncated", "error")

#: Identity and outcome of the episode.
EPISODE_SPEC = MetricSpec(
    name="episode",
    fields=(
        MetricField(
            "rules",
            "str",
            "metric rules the episode was scored with",
            choices=METRIC_RULES,
            since=2,
            legacy="strict",
            imported=True,  # the reference layout is scored by the paper rules
        ),
        MetricField("episode_id", "str", "the episode", upstream="episode.episode_id"),
        MetricField("scene_id", "str", "its scene", upstream="episode.scene_id"),
        MetricField(
            "rollout_index",
            "int",
            "earlier rollouts of this episode in the same output; (episode_id, rollout_index) "
            "is unique in an aggregation",
            minimum=0,
            since=2,
            legacy=0,
            upstream="episode.rollout_index",
        ),
        MetricField(
            "category",
            "str",
            "target category",
            choices=TARGET_CATEGORIES,
            aggregate="breakdown",
            upstream="episode.object_category",
        ),
        MetricField(
            "difficulty",
            "str",
            "difficulty label",
            choices=DIFFICULTY_LABELS,
            nullable=True,
            aggregate="breakdown (null: unlabelled)",
        ),
        MetricField(
            "interact",
            "bool",
            "the episode ends with sitting on the target",
            upstream="success.is_interact_episode",
        ),
        MetricField("target_ids", "int_list", "object ids of the target instances"),
        # the reference layout derives it from active_stop (stop or truncated)
        MetricField("ended_by", "str", "how the episode ended", choices=ENDED_BY, imported=True),
        MetricField(
            "active_stop",
            "bool",
            "the policy chose Stop (ended_by is stop)",
            upstream="success.active_stop",
        ),
        MetricField(
            "steps",
            "int",
            "decision steps including the Stop",
            unit="steps",
            minimum=0,
            aggregate="avg steps: mean over episodes; the tokens-per-step denominator",
            upstream="cost.decision_steps",
        ),
    ),
    columns=(Column("avg steps", "avg_steps", "main", ".1f", Reduce("mean", "steps"), 7),),
)


class EpisodeMetric:
    """Tracker of the episode's identity and outcome (:data:`EPISODE_SPEC`)."""

    spec: ClassVar[MetricSpec] = EPISODE_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: EpisodeStart) -> None:
        self._start = start

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        pass

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        start = self._start
        return {
            "rules": start.rules,
            "episode_id": start.episode_id,
            "scene_id": start.scene_id,
            "rollout_index": start.rollout_index,
            "category": start.category,
            "difficulty": start.difficulty,
            "interact": start.interact,
            "target_ids": list(start.target_ids),
            "ended_by": end.ended_by,
            "active_stop": end.active_stop,
            "steps": end.steps,
        }
