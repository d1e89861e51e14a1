"""The episode part of metrics.json: which episode, scored how, and how it ended.

:class:`EpisodeMetric` (``episode``) is the benchmark's: it adds the target category,
difficulty, interact flag and target ids. :class:`OutcomeMetric` (``outcome``) is the part
every task can score with: the identity, the rules and how the episode ended, read from
any start record with ``episode_id``, ``scene_id``, ``rollout_index`` and ``rules`` (the
metrics wrapper's :class:`~humanclaw_gym.metrics.tracker.EpisodeFacts` has them).
"""

from __future__ import annotations

from typing import Any, ClassVar

from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import METRIC_RULES
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

__all__ = ["ENDED_BY", "EPISODE_SPEC", "OUTCOME_SPEC", "EpisodeMetric", "OutcomeMetric"]

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


#: Identity and outcome of an episode of any task (the benchmark's fields without the
#: target category, difficulty, interact flag and target ids).
OUTCOME_SPEC = MetricSpec(
    name="outcome",
    fields=tuple(
        f
        for f in EPISODE_SPEC.fields
        if f.name not in ("category", "difficulty", "interact", "target_ids")
    ),
    columns=EPISODE_SPEC.columns,
)


class OutcomeMetric:
    """Tracker of an episode's identity, rules and ending (:data:`OUTCOME_SPEC`), for any
    task."""

    spec: ClassVar[MetricSpec] = OUTCOME_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: Any) -> None:
        self._start = start

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        pass

    def _identity(self, start: Any) -> dict[str, Any]:
        """The fields a subclass adds after ``rollout_index`` (none here)."""
        return {}

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        start = self._start
        return {
            "rules": start.rules,
            "episode_id": start.episode_id,
            "scene_id": start.scene_id,
            "rollout_index": start.rollout_index,
            **self._identity(start),
            "ended_by": end.ended_by,
            "active_stop": end.active_stop,
            "steps": end.steps,
        }

    @staticmethod
    def check(metrics: Any) -> str | None:
        """The cross-field rule of a file: ``active_stop`` exactly when ended by Stop."""
        if metrics["active_stop"] != (metrics["ended_by"] == "stop"):
            return (
                f"active_stop ({metrics['active_stop']}) must be true exactly when ended_by is "
                f"'stop' (ended_by={metrics['ended_by']!r})"
            )
        return None


class EpisodeMetric(OutcomeMetric):
    """Tracker of the episode's identity and outcome (:data:`EPISODE_SPEC`): the outcome
    with the benchmark's target category, difficulty, interact flag and target ids."""

    spec: ClassVar[MetricSpec] = EPISODE_SPEC

    def _identity(self, start: EpisodeStart) -> dict[str, Any]:
        return {
            "category": start.category,
            "difficulty": start.difficulty,
            "interact": start.interact,
            "target_ids": list(start.target_ids),
        }
