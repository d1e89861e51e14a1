"""Image-goal navigation (``image_goal``): walk to the place a goal picture was taken.

:class:`ImageGoalTask` plays :class:`~humanclaw_gym.episodes.imagegoal.ImageGoalEpisode`
records (the shipped split ``imagegoal_val100``). At reset it renders the goal picture: the
ego camera of the body standing at the episode's goal pose, drawn by
:meth:`~humanclaw_gym.envs.simulation.Simulation.render_at` (the standing pose of the
reset, moved to the goal; the same camera, renderer and scene as every observation; any
body: the built-in one, a body asset with its own ego camera, an SMPL-X body model). The
picture is the task's public state (``goal_view``), read by :class:`GoalImageSensor`
(``goal_rgb``), which the task adds to the observation: ``Dict(rgb, goal_rgb)``, both
``uint8 (S, S, 3)`` with ``S`` the observation size (448 by default; ``obs_size`` applies
to both). The goal position itself is hidden (no point-goal vector).

Success: the policy stops (Stop/Stand) with the pelvis within the episode's
``success_distance_m`` (1 m) of the goal position, on the floor plane. Its metrics
(:mod:`humanclaw_gym.metrics.imagegoal`): SR, SPL on the navigation grid's geodesic, the
final distance, the path length, Coll. %, Motion Jerk and steps; importing this module
registers its trackers and its sensor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from humanclaw_gym.episodes.imagegoal import (
    IMAGEGOAL_EPISODE_SCHEMA,
    ImageGoalEpisode,
    load_imagegoal_split,
)
from humanclaw_gym.image_sizes import EGO_SIZE_PX
from humanclaw_gym.metrics.imagegoal import ImageGoalStart, stop_success
from humanclaw_gym.registry import register_sensor
from humanclaw_gym.tasks.base import BaseTask, TaskSimulation, TaskSpec, episode_list

if TYPE_CHECKING:  # pragma: no cover
    from gymnasium import spaces

    from humanclaw_gym.metrics.tracker import EpisodeFacts
    from humanclaw_gym.sensors import BodyState, SensorContext

__all__ = ["IMAGE_GOAL_TRACKERS", "GoalImageSensor", "GoalView", "ImageGoalTask"]

#: The trackers of an image-goal metrics.json, in file order.
IMAGE_GOAL_TRACKERS: tuple[str, ...] = ("outcome", "imagegoal_nav", "collision", "jerk", "usage")


class GoalView:
    """The goal picture of one episode: the ego camera at the goal pose, rendered on the
    first request of each size (at reset, by the observation) and kept for the episode.

    Args:
        simulation: the env's simulation (its :meth:`render_at`).
        position: the goal ``[x, floor y, z]``, metres.
        yaw_rad: the goal heading.
    """

    def __init__(self, simulation: TaskSimulation, position: Sequence[float], yaw_rad: float):
        self._simulation = simulation
        self.position = np.array(position, dtype=np.float64)
        self.yaw_rad = float(yaw_rad)
        self._images: dict[int, np.ndarray] = {}

    def rgb(self, size: int = EGO_SIZE_PX) -> np.ndarray:
        """``uint8 (size, size, 3)``, read-only (shared by every observation of the
        episode)."""
        image = self._images.get(size)
        if image is None:
            result = self._simulation.render_at(self.position, self.yaw_rad, "ego", size, ("rgb",))
            image = np.array(result["rgb"], dtype=np.uint8, copy=True)
            image.setflags(write=False)
            self._images[size] = image
        return image


@register_sensor("goal_rgb", description="the goal picture of an image-goal episode")
@dataclass(frozen=True)
class GoalImageSensor:
    """The goal picture of an image-goal episode, ``uint8 (size, size, 3)``, row 0 at the
    top: the head camera's view from the goal pose, rendered at reset at this size.

    It reads the task's public ``goal_view`` (only an image-goal task has one) and renders
    nothing of the current state, so it is a state sensor (no render modes); the picture
    is rendered once per episode.
    """

    size: int = EGO_SIZE_PX
    uuid: str = "goal_rgb"
    modes: frozenset[str] = frozenset()
    task_state: frozenset[str] = frozenset({"goal_view"})

    def space(self) -> spaces.Box:
        from gymnasium import spaces

        return spaces.Box(0, 255, (self.size, self.size, 3), dtype=np.uint8)

    def read(self, result: None, context: SensorContext) -> np.ndarray:
        return context.task["goal_view"].rgb(self.size)


class ImageGoalTask(BaseTask):
    """Walk to where the goal picture was taken and stop within 1 m of it.

    Args: see :class:`~humanclaw_gym.tasks.base.BaseTask` (no task options).
    """

    spec: ClassVar[TaskSpec] = TaskSpec(
        id="image_goal",
        version=1,
        description="walk to the place a goal picture (the ego view there) was taken",
        success="Stop with the pelvis within 1 m of the goal position (floor plane)",
        trackers=IMAGE_GOAL_TRACKERS,
        sensors=("goal_rgb",),
        public_state=("start_position", "start_yaw_rad", "goal_view"),
        episode_schema=IMAGEGOAL_EPISODE_SCHEMA,
        default_split="imagegoal_val100",
    )

    # -- episodes ------------------------------------------------------------------------
    @classmethod
    def load_episodes(
        cls,
        split: Any,
        episodes: Any = None,
        episode_ids: Sequence[str] | None = None,
        instruction_template: Any = None,
    ) -> list[ImageGoalEpisode]:
        """``episodes`` (records, or a split path like ``split``) or the image-goal split
        ``split`` (``"imagegoal_val100"`` or a split directory), restricted to
        ``episode_ids`` in their order.

        Raises:
            ValueError: an instruction template (image-goal episodes carry their own
                instruction), records that are not image-goal episodes, an id not in the
                split, or no episode at all.
        """
        if instruction_template is not None:
            raise ValueError(
                "instruction_template rewrites find_nav_interact instructions; image_goal "
                "episodes carry their own instruction"
            )
        if episodes is not None and not isinstance(episodes, (str, os.PathLike)):
            episodes = list(episodes)
            wrong = [type(e).__name__ for e in episodes if not isinstance(e, ImageGoalEpisode)]
            if wrong:
                raise ValueError(
                    f"task image_goal plays ImageGoalEpisode records, got {wrong[0]} "
                    f"({IMAGEGOAL_EPISODE_SCHEMA} shards: humanclaw_gym.episodes.imagegoal)"
                )
        return episode_list(split, episodes, episode_ids, load_imagegoal_split)

    @classmethod
    def select_episodes(cls, selection: str) -> list[tuple[str, Any]]:
        """A ``humanclaw run --episodes`` selection: ``one`` (the first episode of
        ``imagegoal_val100``), a split name or a split directory."""
        split = cls.spec.default_split if selection == "one" else selection
        chosen = cls.load_episodes(split)
        return [(split, ep) for ep in (chosen[:1] if selection == "one" else chosen)]

    @classmethod
    def episode_label(cls, episode: Any) -> str:
        return "imagegoal"

    # -- an episode ----------------------------------------------------------------------
    def initialize_episode(self, episode: ImageGoalEpisode, simulation: TaskSimulation) -> None:
        """Start ``episode`` and prepare its goal picture (rendered at the observation's
        size by the first observation, i.e. at reset)."""
        super().initialize_episode(episode, simulation)
        self._goal_view = GoalView(simulation, episode.goal_position, episode.goal_yaw_rad)

    def public_state(self) -> Mapping[str, Any]:
        """The start pose and the goal picture (``goal_view``: :class:`GoalView`); never
        the goal position."""
        state = dict(super().public_state())
        state["goal_view"] = self._goal_view
        return state

    # -- scoring -------------------------------------------------------------------------
    def evaluate(self, body: BodyState) -> dict[str, Any]:
        """The success rule as if the episode stopped now: ``distance_m`` from the pelvis
        to the goal position (floor plane), ``success`` within the success radius."""
        episode = self._current()
        success, distance = stop_success(
            True, body.pelvis_position[[0, 2]], episode.goal_xz, episode.success_distance_m
        )
        return {"success": success, "distance_m": distance}

    def metric_start(self, facts: EpisodeFacts) -> ImageGoalStart:
        """The image-goal trackers' :class:`~humanclaw_gym.metrics.imagegoal.
        ImageGoalStart`: the start and goal positions, the success radius and the route
        length beside the wrapper's facts (floor, movable objects, rules)."""
        episode = self._current()
        return ImageGoalStart(
            episode_id=episode.episode_id,
            scene_id=episode.scene_id,
            start_xz=episode.start_xz,
            goal_xz=episode.goal_xz,
            success_distance_m=episode.success_distance_m,
            geodesic_distance_m=episode.info.geodesic_distance,
            difficulty=episode.info.difficulty,
            dynamic_ids=tuple(facts.dynamic_ids),
            floor_height_m=float(facts.floor_height_m),
            initial_penetration_m=float(facts.initial_penetration_m),
            rules=facts.rules,
            floor_source=facts.floor_source,
            rollout_index=facts.rollout_index,
            object_handles=facts.object_handles,
            link_names=facts.link_names,
        )
