"""The find -> navigate -> interact task of the HumanClaw benchmark (``find_nav_interact``).

:class:`FindNavInteractTask` owns the episode side of ``HumanClawFindNavInteract-v0``: the
episode list (the ``humanclaw_episodes_v2`` splits, reference episodes, instruction
templates) and its order, resolving an episode's goals against the loaded scene, the
decision-step clock and its limit, the public ``info`` (the instruction, the target
category) and the ending rule (Stop ends the episode as an active stop and executes no
motion; the step limit truncates it). It is scored by the paper's metric trackers
(:data:`FIND_NAV_INTERACT_TRACKERS`, the order of the paper's table and of metrics.json:
those of :data:`humanclaw_gym.metrics.trackers.TRACKERS`) and knows nothing of physics, rendering, observers or Gymnasium spaces.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from humanclaw_gym.episodes.instructions import apply_instruction_template
from humanclaw_gym.episodes.resolve import resolve_episode
from humanclaw_gym.metrics.trackers import benchmark_tracker_names
from humanclaw_gym.tasks.base import BaseTask, TaskSimulation, TaskSpec, episode_list

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.episodes import Episode
    from humanclaw_gym.episodes.schema import InstructionTemplate
    from humanclaw_gym.metrics.tracker import EpisodeFacts, EpisodeStart
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.sensors import BodyState

__all__ = ["FIND_NAV_INTERACT_TRACKERS", "FindNavInteractTask", "load_episodes"]

#: The trackers of the benchmark's metrics.json, in the order of the paper's table (the
#: registered names of :data:`humanclaw_gym.metrics.trackers.TRACKERS`).
FIND_NAV_INTERACT_TRACKERS: tuple[str, ...] = benchmark_tracker_names()


def load_episodes(
    split: str | os.PathLike[str],
    episodes: Sequence[Episode] | str | os.PathLike[str] | None = None,
    episode_ids: Sequence[str] | None = None,
    instruction_template: InstructionTemplate | None = None,
) -> list[Episode]:
    """The episode list of an env: ``episodes`` (records, or a split path like ``split``)
    or the split ``split``, restricted to ``episode_ids`` in their order, with every
    instruction written by ``instruction_template`` when one is given.

    Raises:
        ValueError: an id not in the split, or no episode at all.
    """
    from humanclaw_gym import episodes as episodes_mod

    chosen = episode_list(split, episodes, episode_ids, episodes_mod.load_split)
    return apply_instruction_template(chosen, instruction_template)


class FindNavInteractTask(BaseTask):
    """Find an object in a home, walk to it and (for beds, couches, toilets) sit on it.

    Args: see :class:`~humanclaw_gym.tasks.base.BaseTask` (no task options).
    """

    spec: ClassVar[TaskSpec] = TaskSpec(
        id="find_nav_interact",
        version=1,
        description="find an object category in a home, walk to it and sit on seats",
        success=(
            "Stop with a body point within 0.2 m of a target instance's box (NavSR@20cm); "
            "for beds, couches and toilets also seated on it (InteractSR)"
        ),
        trackers=FIND_NAV_INTERACT_TRACKERS,
        episode_schema="humanclaw_episodes_v2",
        default_split="val100",
        metrics_schema="humanclaw_metrics_v",
    )

    @classmethod
    def load_episodes(
        cls,
        split: Any,
        episodes: Any = None,
        episode_ids: Sequence[str] | None = None,
        instruction_template: Any = None,
    ) -> list[Any]:
        return load_episodes(split, episodes, episode_ids, instruction_template)

    @classmethod
    def select_episodes(cls, selection: str) -> list[tuple[str, Any]]:
        """See :func:`humanclaw_gym.episodes.selection.select_episodes` (``one``,
        ``val100``, ``val``, split directories, shards, id lists, subset files)."""
        from humanclaw_gym.episodes.selection import select_episodes

        return select_episodes(selection)

    @classmethod
    def episode_label(cls, episode: Any) -> str:
        return str(episode.object_category)

    def initialize_episode(self, episode: Episode, simulation: TaskSimulation) -> None:
        """Start ``episode``; its scene is kept for :meth:`evaluate`."""
        super().initialize_episode(episode, simulation)
        self._scene = simulation.scene

    def resolve(self, episode: Episode, scene: SceneSpec) -> Episode:
        """``episode`` as played in its loaded ``scene``: the goals of imported episodes
        matched to the scene's objects (see :func:`~humanclaw_gym.episodes.resolve.
        resolve_episode`); changes nothing."""
        return resolve_episode(episode, scene)

    def info(self) -> dict[str, Any]:
        """The public ``info`` of the current state (never hidden state)."""
        ep = self._current()
        return {
            "instruction": ep.instruction,
            "episode_id": ep.episode_id,
            "scene_id": ep.scene_id,
            "target_category": ep.object_category,
            "interact": bool(ep.interact),
            "step": self.step_count,
            "max_steps": self.max_steps,
            "executed_skill": None if self.last_call is None else str(self.last_call),
        }

    # -- scoring -------------------------------------------------------------------------
    def _target_aabbs(self, scene: SceneSpec) -> tuple[list[int], np.ndarray]:
        ids = [int(g.object_id) for g in self._current().goals]
        return ids, np.array([np.stack(scene.object_by_id(i).aabb()) for i in ids])

    def evaluate(self, body: BodyState) -> dict[str, Any]:
        """NavSR@20cm's rule at the current state: ``distance_m`` from the body points to
        the nearest target box, ``success`` when it is within 0.2 m (the Interact part
        needs the episode's contacts: the metrics wrapper scores it)."""
        from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance
        from humanclaw_gym.metrics.thresholds import NAV_DISTANCE_M

        _, aabbs = self._target_aabbs(self._scene)
        distance = float(body_to_target_aabb_distance(body.link_origins, aabbs))
        return {"success": distance <= NAV_DISTANCE_M, "distance_m": distance}

    def metric_start(self, facts: EpisodeFacts) -> EpisodeStart:
        """The paper trackers' :class:`~humanclaw_gym.metrics.tracker.EpisodeStart`: the
        episode's category, targets and their boxes, interact flag and difficulty beside
        the wrapper's facts (floor, initial penetration, movable objects, rules)."""
        from humanclaw_gym.metrics.tracker import EpisodeStart

        episode = self._current()
        target_ids, aabbs = self._target_aabbs(facts.scene)
        return EpisodeStart(
            episode_id=episode.episode_id,
            scene_id=episode.scene_id,
            category=episode.object_category,
            target_ids=target_ids,
            target_aabbs=aabbs,
            interact=bool(episode.interact),
            dynamic_ids=list(facts.dynamic_ids),
            floor_height_m=float(facts.floor_height_m),
            initial_penetration_m=float(facts.initial_penetration_m),
            difficulty=getattr(getattr(episode, "info", None), "difficulty", None),
            rules=facts.rules,
            floor_source=facts.floor_source,
            rollout_index=facts.rollout_index,
            object_handles=facts.object_handles,
            link_names=facts.link_names,
        )
