"""The task protocol: what a task declares (:class:`TaskSpec`) and the hooks the env calls.

A task decides the learning problem of an env: which episodes exist and which comes next,
how an episode starts, what the public ``info`` and the task's public state hold, when an
episode ends and what counts as success, and which metric trackers score it. The env
(:class:`~humanclaw_gym.envs.env.HumanClawEnv`) composes a task with the simulation layer
(physics, renderer, motion) and the sensors; the task never builds or steps a backend.

Write a task by subclassing :class:`BaseTask` (it keeps the episode order, the step clock
and the Stop ending) and overriding a few hooks, then register it by name::

    from humanclaw_gym.tasks import BaseTask, TaskSpec, register_task

    @register_task("my_task")
    class MyTask(BaseTask):
        spec = TaskSpec(id="my_task", version=1, ...)

        @classmethod
        def load_episodes(cls, split, episodes=None, episode_ids=None,
                          instruction_template=None): ...

        def evaluate(self, body): ...

``gym.make("HumanClaw-v0", task="my_task")`` then composes an env of it; ``humanclaw run
--task my_task`` (or ``--task mypkg.module:MyTask``) evaluates it. The order in which the
env calls the hooks:

* made: ``cls.load_episodes(...)`` then ``cls(episodes, num_shards=, shard_index=,
  max_steps=, **task_options)``;
* ``reset``: ``choose(seed, options)`` (before anything changes) -> the scene is loaded ->
  ``resolve(episode, scene)`` -> ``start_pose(episode)`` and ``episode_seed(episode)``
  place the humanoid -> ``initialize_episode(episode, simulation)`` -> the sensors read
  (with :meth:`public_state`) -> ``info()``;
* ``step``: ``executes_motion(call)`` -> the skill runs -> the sensors read ->
  ``advance(call)`` gives ``(terminated, truncated)`` -> ``info()``.

The metrics wrapper calls :meth:`metric_start` at every reset (the record the task's
trackers start from) and reads :attr:`TaskSpec.trackers`; a privileged env's
``evaluate()`` calls :meth:`evaluate`.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.backends.protocols import RenderResult
    from humanclaw_gym.episodes.order import EpisodeOrder
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.sensors import BodyState
    from humanclaw_gym.skills import SkillCall

__all__ = [
    "DEFAULT_MAX_STEPS",
    "RESET_OPTIONS",
    "BaseTask",
    "Task",
    "TaskSimulation",
    "TaskSpec",
    "episode_list",
]

#: Decision steps of an episode that declares no limit of its own.
DEFAULT_MAX_STEPS = 100

#: Keys ``env.reset(options=...)`` accepts.
RESET_OPTIONS: tuple[str, ...] = ("episode_id", "scene_id")

_ID = re.compile(r"[a-z][a-z0-9_]*")
_SCHEMA_PREFIX = re.compile(r"[a-z][a-z0-9_]*_v")


@dataclass(frozen=True)
class TaskSpec:
    """What a task is, declared once on its class (``spec = TaskSpec(...)``).

    Attributes:
        id: the task's semantic id, recorded in every result (replay manifests, run
            fingerprints, episode results); lower case, ``[a-z][a-z0-9_]*``. The name a
            task is registered under is only a lookup key (one task may have aliases).
        version: bumped whenever the task's semantics (episodes, success, observation,
            metrics) change; recorded beside ``id``.
        description: one line for listings.
        success: the success rule in words (docs, listings, ``humanclaw doctor``).
        trackers: the registered metric trackers that score the task, in the order of its
            ``metrics.json`` (names of :func:`humanclaw_gym.registry.register_tracker`).
        sensors: registered sensors the task adds to every observation (after the ego
            sensors of ``sensors=`` / ``obs_mode``), each made at the observation's size
            when it has one (e.g. a goal image rendered at reset).
        public_state: the keys of :meth:`BaseTask.public_state` (what sensors may read of
            the task: the start pose for all tasks, a goal position for a point-goal
            task); a sensor that needs a key the task does not expose is refused when the
            env is made.
        episode_schema: the schema tag of the episode records the task reads.
        default_split: the split an env plays when none is given.
        metrics_schema: the prefix of its ``metrics.json`` layout tag (``<prefix><N>``,
            ``N`` the highest ``since`` of its fields); default
            ``humanclaw_<id>_metrics_v``. The find-nav-interact task keeps the
            benchmark's ``humanclaw_metrics_v``.

    Raises:
        ValueError: a malformed declaration (naming the field and what is allowed).
    """

    id: str
    version: int
    description: str
    success: str
    trackers: tuple[str, ...]
    sensors: tuple[str, ...] = ()
    public_state: tuple[str, ...] = ("start_position", "start_yaw_rad")
    episode_schema: str = "humanclaw_episodes_v2"
    default_split: str = "val100"
    metrics_schema: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"TaskSpec.id={self.id!r} is invalid: allowed [a-z][a-z0-9_]*")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"TaskSpec.version={self.version!r} is invalid: allowed an int >= 1")
        for name in ("description", "success", "episode_schema", "default_split"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"TaskSpec.{name}={value!r} is invalid: allowed a non-empty str")
        for name in ("trackers", "sensors", "public_state"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(
                    f"TaskSpec.{name}={value!r} is invalid: allowed a tuple of non-empty names"
                )
            if len(set(value)) != len(value):
                raise ValueError(f"TaskSpec.{name}={value!r} names an entry twice")
            object.__setattr__(self, name, tuple(value))
        if not self.trackers:
            raise ValueError("TaskSpec.trackers is empty: a task names the trackers scoring it")
        prefix = self.metrics_schema
        if prefix is None:
            object.__setattr__(self, "metrics_schema", f"humanclaw_{self.id}_metrics_v")
        elif not isinstance(prefix, str) or not _SCHEMA_PREFIX.fullmatch(prefix):
            raise ValueError(
                f"TaskSpec.metrics_schema={prefix!r} is invalid: allowed a prefix like "
                "'humanclaw_my_task_metrics_v'"
            )

    def record(self) -> dict[str, Any]:
        """What results record of the task: ``{"id", "version"}``."""
        return {"id": self.id, "version": self.version}


def episode_list(
    split: Any,
    episodes: Any,
    episode_ids: Sequence[str] | None,
    load_split: Callable[[Any], Sequence[Any]],
) -> list[Any]:
    """The episodes of an env, as :meth:`BaseTask.load_episodes` describes them:
    ``episodes`` (records, or a split path, read as ``split``) or ``load_split(split)``,
    restricted to ``episode_ids`` in their order.

    Raises:
        ValueError: ``episode_ids`` not a list of ids, an id not in the split, or no
            episode at all.
    """
    from humanclaw_gym.id_lists import check_id_list

    if isinstance(episodes, (str, os.PathLike)):  # a split path: same as split=
        split, episodes = episodes, None
    chosen = list(episodes) if episodes is not None else list(load_split(split))
    if episode_ids is not None:
        wanted = check_id_list(episode_ids, "episode_ids")
        by_id = {ep.episode_id: ep for ep in chosen}
        missing = [e for e in wanted if e not in by_id]
        if missing:
            raise ValueError(f"episode_ids not in split {split!r}: {missing[:5]}")
        chosen = [by_id[e] for e in wanted]
    if not chosen:
        raise ValueError(f"split {split!r} has no episodes")
    return chosen


class TaskSimulation(Protocol):
    """What a task may use of the env's simulation layer in
    :meth:`BaseTask.initialize_episode` (the env's
    :class:`~humanclaw_gym.envs.simulation.Simulation` implements it): read the loaded
    scene and the state, render a camera at a pose of the task's choosing. Nothing here
    changes the simulated state."""

    @property
    def scene(self) -> SceneSpec | None: ...

    def snapshot(self) -> Any: ...

    def render_at(
        self,
        position: np.ndarray,
        yaw_rad: float,
        view: str = "ego",
        size: int = ...,
        modes: Any = ("rgb",),
    ) -> RenderResult: ...


@runtime_checkable
class Task(Protocol):
    """The hooks the env calls (see the module docstring for their order).

    :class:`BaseTask` implements all but the episode loading and the evaluation; subclass
    it.
    """

    spec: ClassVar[TaskSpec]
    episode: Any
    step_count: int
    order: EpisodeOrder

    @classmethod
    def load_episodes(
        cls,
        split: Any,
        episodes: Any = None,
        episode_ids: Sequence[str] | None = None,
        instruction_template: Any = None,
    ) -> list[Any]: ...

    @classmethod
    def select_episodes(cls, selection: str) -> list[tuple[str, Any]]: ...

    @classmethod
    def episode_label(cls, episode: Any) -> str: ...

    def choose(self, seed: int | None, options: Mapping[str, Any] | None) -> Any: ...

    def resolve(self, episode: Any, scene: SceneSpec) -> Any: ...

    def start_pose(self, episode: Any) -> tuple[np.ndarray, float]: ...

    def episode_seed(self, episode: Any) -> int: ...

    def initialize_episode(self, episode: Any, simulation: TaskSimulation) -> None: ...

    def executes_motion(self, call: SkillCall) -> bool: ...

    def advance(self, call: SkillCall) -> tuple[bool, bool]: ...

    @property
    def max_steps(self) -> int: ...

    def info(self) -> dict[str, Any]: ...

    def public_state(self) -> Mapping[str, Any]: ...

    def evaluate(self, body: BodyState) -> dict[str, Any]: ...

    def metric_start(self, facts: Any) -> Any: ...


class BaseTask:
    """The common part of every task: episode order, episode start, step clock and limit,
    the Stop ending, ``info``, the public state and the metric start. Subclasses declare
    ``spec`` and implement :meth:`load_episodes` and :meth:`evaluate`; every other hook may
    be overridden.

    Args:
        episodes: the episodes this env may play (all shards).
        num_shards / shard_index: see :class:`~humanclaw_gym.episodes.order.EpisodeOrder`.
        max_steps: decision steps per episode; None takes each episode's own limit
            (``episode.max_steps``, else :data:`DEFAULT_MAX_STEPS`).
        **options: task options (``gym.make(..., task_options={...})``); this base class
            takes none.

    Raises:
        ValueError: ``max_steps`` is not an int >= 1, the sharding is invalid, or an
            unknown task option.
    """

    spec: ClassVar[TaskSpec]

    def __init__(
        self,
        episodes: Sequence[Any],
        num_shards: int = 1,
        shard_index: int | None = None,
        max_steps: int | None = None,
        **options: Any,
    ) -> None:
        if options:
            raise ValueError(f"task {self.spec.id!r} takes no task options, got {sorted(options)}")
        if max_steps is not None and (
            not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
        ):
            raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
        from humanclaw_gym.episodes.order import EpisodeOrder

        self.order = EpisodeOrder(list(episodes), num_shards, shard_index)
        self._max_steps = max_steps
        self.episode: Any = None
        self.step_count = 0
        self.last_call: SkillCall | None = None

    # ------------------------------------------------------------------------------------
    # episodes
    # ------------------------------------------------------------------------------------
    @classmethod
    def load_episodes(
        cls,
        split: Any,
        episodes: Any = None,
        episode_ids: Sequence[str] | None = None,
        instruction_template: Any = None,
    ) -> list[Any]:
        """The episode list of an env: ``episodes`` (records or a path) or the split
        ``split``, restricted to ``episode_ids`` in their order (:func:`episode_list` does
        this given the task's split reader).

        Raises:
            ValueError: an id not in the split, no episode at all, or an option the task
                does not support (e.g. an instruction template for a task without
                instructions).
        """
        raise NotImplementedError(f"{cls.__qualname__} does not implement load_episodes")

    @classmethod
    def select_episodes(cls, selection: str) -> list[tuple[str, Any]]:
        """``(split, episode)`` per episode of a ``humanclaw run --episodes`` selection, in
        order (the split is what the run's workers pass to :meth:`load_episodes`)."""
        return [(selection, ep) for ep in cls.load_episodes(selection)]

    @classmethod
    def episode_label(cls, episode: Any) -> str:
        """A short label of an episode for output folder names
        (``<scene>_ep<id>_<label>``): its object category when it has one, else the task id."""
        return str(getattr(episode, "object_category", None) or cls.spec.id)

    # ------------------------------------------------------------------------------------
    # choosing and starting an episode
    # ------------------------------------------------------------------------------------
    def choose(self, seed: int | None, options: Mapping[str, Any] | None) -> Any:
        """The next episode for ``reset(seed=..., options=...)``.

        Raises:
            ValueError: options that are not a mapping of :data:`RESET_OPTIONS`, or an
                unknown episode / scene; nothing changed then.
        """
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(
                "reset options must be a mapping with keys from "
                f"{list(RESET_OPTIONS)}, e.g. {{'episode_id': 'hc_val_003_000'}}; "
                f"got {type(options).__name__} {options!r:.80}"
            )
        options = dict(options or {})
        unknown = set(options) - set(RESET_OPTIONS)
        if unknown:
            raise ValueError(
                f"unknown reset options {sorted(unknown)}; allowed: {', '.join(RESET_OPTIONS)}"
            )
        return self.order.next(seed, options)

    def resolve(self, episode: Any, scene: SceneSpec) -> Any:
        """``episode`` as played in its loaded ``scene`` (default: unchanged)."""
        return episode

    def start_pose(self, episode: Any) -> tuple[np.ndarray, float]:
        """``(position (3,) [x, floor y, z] in metres, yaw in rad)`` the humanoid starts at."""
        return (
            np.asarray(episode.start_position, dtype=np.float64),
            float(episode.start_yaw_rad),
        )

    @staticmethod
    def episode_seed(episode: Any) -> int:
        """A stable per-episode seed for stochastic generators (independent of history)."""
        return zlib.crc32(f"{episode.scene_id}/{episode.episode_id}".encode())

    def initialize_episode(self, episode: Any, simulation: TaskSimulation) -> None:
        """Start the (resolved) ``episode``: the humanoid stands at its start pose in the
        loaded scene. A task that needs more (a goal image, say) reads or renders it here
        through ``simulation`` (:class:`TaskSimulation`: ``render_at`` renders a camera at
        a pose of the task's choosing). Subclasses call
        ``super().initialize_episode(...)``."""
        self.begin(episode)

    def begin(self, episode: Any) -> None:
        """Make ``episode`` the current one, the step clock at 0."""
        self.episode = episode
        self.step_count = 0
        self.last_call = None

    # ------------------------------------------------------------------------------------
    # the clock and the ending rule
    # ------------------------------------------------------------------------------------
    @staticmethod
    def executes_motion(call: SkillCall) -> bool:
        """Whether ``call`` runs motion: Stop is an active stop and executes none."""
        return not call.is_stop

    def advance(self, call: SkillCall) -> tuple[bool, bool]:
        """Count one executed decision.

        Returns:
            ``(terminated, truncated)``: terminated on Stop; truncated when the step limit
            is reached without a Stop.
        """
        self.step_count += 1
        self.last_call = call
        terminated = call.is_stop
        truncated = (not terminated) and self.step_count >= self.max_steps
        return terminated, truncated

    @property
    def max_steps(self) -> int:
        """Decision steps of the current episode."""
        if self._max_steps is not None:
            return self._max_steps
        return int(getattr(self.episode, "max_steps", None) or DEFAULT_MAX_STEPS)

    # ------------------------------------------------------------------------------------
    # what the policy and the sensors see
    # ------------------------------------------------------------------------------------
    def _current(self) -> Any:
        if self.episode is None:
            raise RuntimeError("no episode has started")
        return self.episode

    def info(self) -> dict[str, Any]:
        """The public ``info`` of the current state (never hidden state)."""
        ep = self._current()
        info: dict[str, Any] = {}
        if getattr(ep, "instruction", None) is not None:
            info["instruction"] = ep.instruction
        info.update(
            episode_id=ep.episode_id,
            scene_id=ep.scene_id,
            step=self.step_count,
            max_steps=self.max_steps,
            executed_skill=None if self.last_call is None else str(self.last_call),
        )
        return info

    def public_state(self) -> Mapping[str, Any]:
        """What sensors may read of the task (keys: ``spec.public_state``): by default the
        start pose, ``start_position`` ``float64 (3,)`` (metres, floor y) and
        ``start_yaw_rad``. Never hidden state: a goal position belongs here only in a task
        whose goal is given to the agent (a point-goal task)."""
        position, yaw = self.start_pose(self._current())
        position = np.array(position, dtype=np.float64)
        position.setflags(write=False)
        return {"start_position": position, "start_yaw_rad": float(yaw)}

    # ------------------------------------------------------------------------------------
    # scoring
    # ------------------------------------------------------------------------------------
    def evaluate(self, body: BodyState) -> dict[str, Any]:
        """The task's success rule at the current state, as if the episode stopped now:
        at least ``{"success": bool}`` (hidden state: only a privileged env's
        ``evaluate()`` returns it)."""
        raise NotImplementedError(f"{type(self).__qualname__} does not implement evaluate")

    def metric_start(self, facts: Any) -> Any:
        """The record the task's trackers start an episode from (their ``on_reset``
        argument), made from the metrics wrapper's
        :class:`~humanclaw_gym.metrics.tracker.EpisodeFacts` of the current episode.
        By default the facts themselves (all the shared trackers read: ``outcome``,
        ``collision``, ``disturbance``, ``jerk``, ``motion_anomaly``, ``usage``; a
        task's own tracker reads the episode record from ``facts.episode``)."""
        return facts
