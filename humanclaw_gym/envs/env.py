"""``HumanClaw-v0``: a HumanClaw env composed from any registered task.

The env is the Gymnasium surface: spaces, ``reset``, ``step``, ``close``, the observer
events and the privileged view. It composes three parts and keeps none of their logic:
the task (a :mod:`humanclaw_gym.tasks` class, chosen by ``task=``: episode order, episode
start, step clock and limit, ``info``, public state, ending, success), the simulation layer
(:class:`~humanclaw_gym.envs.simulation.Simulation`: backends, scene, skill execution,
renders, state snapshots) and the declared sensors (:mod:`humanclaw_gym.sensors`).
``HumanClawFindNavInteract-v0`` is this env with the benchmark's task
(:class:`~humanclaw_gym.envs.find_nav_interact.FindNavInteractEnv`). The user contract
(spaces, info, episode end, arguments) is in ``docs/env.md``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from humanclaw_gym.backends.config import BACKEND_FIELDS, BackendConfig
from humanclaw_gym.envs.events import EnvObserver, ObserverSet, check_needs
from humanclaw_gym.envs.feed import ObserverFeed, copy_observation
from humanclaw_gym.envs.simulation import Simulation
from humanclaw_gym.episodes.instructions import InstructionTemplate, resolve_instruction_template
from humanclaw_gym.episodes.io import SceneNotInstalledError, scene_not_installed
from humanclaw_gym.id_lists import check_id_list
from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX
from humanclaw_gym.sensors import (
    BodyState,
    EgoRGBSensor,
    check_sensors,
    make_sensor,
    observation_space,
    read_sensors,
    renders,
    sensors_for,
)
from humanclaw_gym.skills import SkillCall
from humanclaw_gym.skills.spaces import skill_action_space, validated_action
from humanclaw_gym.tasks import DEFAULT_TASK, Task, resolve_task

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.backends.protocols import MotionGenerator
    from humanclaw_gym.episodes import Episode
    from humanclaw_gym.policy import Decision
    from humanclaw_gym.scenes.spec import SceneSpec

__all__ = ["HumanClawEnv", "PrivilegedState"]

FPS = 30
_READ = object()  # "read the body points now" (see _end_episode)


@dataclass(frozen=True)
class PrivilegedState:
    """Hidden simulator state for the oracle agent and tests (``privileged=True`` only).

    Attributes:
        episode: the full episode record (for find-nav-interact: goals with object ids,
            AABBs, approach poses).
        scene: the scene spec.
        realized_frame: ``(75,)`` current realized humanoid pose.
        root_xz: ``(2,)`` pelvis position on the floor plane.
        yaw_rad: heading of the realized body (rad, Y-up, 0 = facing +Z).
        link_origins: ``(P, 3)`` body points used by the final-distance metric.
        object_ids / object_poses: dynamic objects and their ``(M, 7)`` poses.
        step: decision steps taken so far.

    The arrays but ``root_xz`` are the simulation snapshot's, shared and read-only.
    """

    episode: Episode
    scene: SceneSpec
    realized_frame: np.ndarray
    root_xz: np.ndarray
    yaw_rad: float
    link_origins: np.ndarray
    object_ids: tuple[int, ...]
    object_poses: np.ndarray
    step: int


class _Phase(enum.Enum):
    """The env's one lifecycle state."""

    NEW = "new"  # no episode has started (made, or only failed resets since)
    RUNNING = "running"  # an episode runs: step() is allowed, observers saw on_reset
    ENDED = "ended"  # the episode ended (Stop, step limit, error) or a reset failed after it
    CLOSED = "closed"


class HumanClawEnv(gym.Env):
    """A whole-body humanoid in a home, driven by skills, on the task ``task``.

    Each ``step`` executes one :class:`~humanclaw_gym.SkillCall` (or its text, its ``Dict``
    encoding, a :class:`~humanclaw_gym.policy.Decision`) as 0.5 s of generated motion run by
    the half-physics, and returns the observation of the declared sensors (default: the
    egocentric RGB image ``uint8 (448, 448, 3)`` plus the sensors the task adds), reward
    ``0.0``, ``terminated`` / ``truncated`` by the task's ending rule (Stop; the step
    limit) and the task's public ``info``. Invalid actions raise ``SkillCallError`` before
    any state changes.

    ``task`` is a registered task name, ``"module:Class"`` or a task class
    (:mod:`humanclaw_gym.tasks`); ``task_options`` are its own keyword arguments. The whole
    contract (action and observation spaces, info, rewards, starting state, episode end,
    every argument, scene datasets, the body model, vector envs, version history) is in
    ``docs/env.md``; the architecture in ``docs/architecture.md``.
    """

    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": FPS,
        "autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        task: str | type[Task] = DEFAULT_TASK,
        split: str | os.PathLike[str] | None = None,
        episode_ids: Sequence[str] | None = None,
        render_mode: str | None = None,
        privileged: bool = False,
        max_steps: int | None = None,
        num_shards: int = 1,
        shard_index: int | None = None,
        episodes: Sequence[Episode] | str | os.PathLike[str] | None = None,
        sensors: Sequence[Any] | None = None,
        obs_size: int | None = None,
        obs_mode: str | None = None,
        backend: BackendConfig | None = None,
        instruction_template: str | os.PathLike[str] | InstructionTemplate | None = None,
        profile: Any = None,
        release_dir: str | os.PathLike[str] | None = None,
        motion_weights: str | os.PathLike[str] | None = None,
        task_options: Mapping[str, Any] | None = None,
        **backend_fields: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        task_cls = resolve_task(task)  # before anything is built: an unknown task fails now
        spec = task_cls.spec
        if task_options is not None and not isinstance(task_options, Mapping):
            raise ValueError(
                f"task_options must be a mapping of the task's keyword arguments, got "
                f"{type(task_options).__name__}"
            )
        if split is None:
            split = spec.default_split
        self.run_profile: Any = None
        if profile is not None or release_dir is not None or motion_weights is not None:
            if spec.id != DEFAULT_TASK:
                raise ValueError(
                    f"profile / release_dir / motion_weights run the published benchmark, "
                    f"task {DEFAULT_TASK!r}; task {spec.id!r} cannot take them"
                )
            from humanclaw_gym.profiles import profile_for_env

            self.run_profile = profile_for_env(
                profile,
                release_dir,
                motion_weights,
                split,
                episodes,
                backend,
                backend_fields,
                episode_ids,
            )
            split, episodes = self.run_profile.episodes, None
            if episode_ids is None:  # the profile's narrowed selection (limit / ids)
                episode_ids = self.run_profile.episode_ids
            backend, backend_fields = self.run_profile.backend, {}
        config = _backend_config(backend, backend_fields)
        template = resolve_instruction_template(instruction_template)
        if sensors is not None and obs_mode is not None:
            raise ValueError("give either sensors= or the obs_mode= shorthand, not both")
        size = EGO_SIZE_PX if obs_size is None else obs_size
        if sensors is None:
            sensors = sensors_for("rgb" if obs_mode is None else obs_mode, size)
        elif isinstance(sensors, (str, bytes)):
            raise ValueError(
                f"sensors must be a list of sensors or registered sensor names, got {sensors!r}"
            )
        elif obs_size is not None:
            sensors_for("rgb", obs_size)  # the same range check as the shorthand's
            for i, sensor in enumerate(sensors):
                if not isinstance(sensor, str):
                    raise ValueError(
                        f"obs_size= sizes the sensors given by name (and the task's); "
                        f"sensors[{i}] is a {type(sensor).__name__} instance: give it its "
                        "size itself, not both"
                    )
        chosen = [make_sensor(s, size) for s in sensors]
        given = {getattr(s, "uuid", None) for s in chosen}
        added = [make_sensor(name, size) for name in spec.sensors]
        chosen += [s for s in added if getattr(s, "uuid", None) not in given]
        self._sensors = check_sensors(chosen, bool(privileged), spec.public_state)
        if episode_ids is not None:  # a bare string is refused, not read per character
            episode_ids = check_id_list(episode_ids, "episode_ids")
        all_episodes = task_cls.load_episodes(split, episodes, episode_ids, template)
        self._task: Task = task_cls(
            all_episodes,
            num_shards=num_shards,
            shard_index=shard_index,
            max_steps=max_steps,
            **dict(task_options or {}),
        )
        self.render_mode = render_mode
        self._privileged = bool(privileged)
        self._observers = ObserverSet()
        self._sim = Simulation(config.check())  # checked now, built on the first reset
        self._feed = ObserverFeed(self._sim, self._observers)
        self._sim.check_scenes(all_episodes)  # imported episodes name a missing scene now
        self._resolve(frozenset())
        self.backend = config
        self.observation_space = observation_space(self._sensors)
        self.action_space = skill_action_space()
        self._obs: Any = None
        self._phase = _Phase.NEW

    # -- observers ------------------------------------------------------------------------
    def _resolve(self, needs: frozenset[str]) -> None:
        modes = {m for s in self._sensors for m in s.modes}
        if "instance" in needs:
            modes.add("instance")
        self._sim.resolve(
            modes,
            "contacts" in needs,
            max((s.size for s in self._sensors if renders(s)), default=0),
            contact_parts="contact_parts" in needs,
        )

    def add_observer(self, observer: EnvObserver, needs: Sequence[str] = ()) -> int:
        """Register an :class:`~humanclaw_gym.envs.events.EnvObserver`; returns a handle.

        ``needs`` is a subset of :data:`~humanclaw_gym.envs.events.NEEDS`; it is checked
        against the backends' capabilities immediately (a missing capability raises here).
        Register before ``reset``: needs take effect from the next episode.
        """
        needs_set = check_needs(needs)
        self._resolve(self._observers.needs | needs_set)
        return self._observers.add(observer, needs_set)

    def remove_observer(self, handle: int) -> None:
        """Unregister an observer (unknown handles are ignored)."""
        self._observers.remove(handle)

    # -- public views ---------------------------------------------------------------------
    @property
    def sensors(self) -> tuple[Any, ...]:
        """The sensors the observation is made of (see :mod:`humanclaw_gym.sensors`)."""
        return self._sensors

    @property
    def task(self) -> Task:
        """The task (its ``spec``, episode order, current episode, step clock). Owned by
        the env: read it, never drive it yourself."""
        return self._task

    @property
    def simulation(self) -> Simulation:
        """The simulation layer (backends, scene, renders, snapshots). Owned by the env:
        read from it (benchmarks, tools), never reset, step or close it yourself."""
        return self._sim

    @property
    def backend_info(self) -> dict[str, Any]:
        """Names of the backends in use and why this renderer was chosen; with a profile
        (``profile="paper"``) also its record (``"profile"``: release, body, weights,
        scene dataset), which replay manifests keep."""
        info = dict(self._sim.backend_info)
        if self.run_profile is not None:
            info["profile"] = dict(self.run_profile.record)
        return info

    @property
    def episodes(self) -> tuple[Episode, ...]:
        """The episodes this env (this shard) can play, in its order."""
        return self._task.order.episodes()

    def episodes_for_seed(self, seed: int) -> tuple[Episode, ...]:
        """The episodes, in order, that resets after ``reset(seed=seed)`` will play."""
        return self._task.order.episodes_for_seed(seed)

    @property
    def current_episode_id(self) -> str | None:
        return None if self._task.episode is None else self._task.episode.episode_id

    @property
    def motion_generator(self) -> MotionGenerator | None:
        """The motion generator in use (built on the first reset; None before it and after
        close). Owned by the env: read its ``capabilities`` or hand it to a batching service
        (``BatchedMotionSyncVectorEnv`` does), but do not reset or close it yourself."""
        return self._sim.motion

    @property
    def privileged(self) -> bool:
        return self._privileged

    # The backends themselves (None until built); for tests and benchmarks.
    _physics = property(lambda self: self._sim.physics)
    _renderer = property(lambda self: self._sim.renderer)
    _motion = property(lambda self: self._sim.motion)
    _body_model = property(lambda self: self._sim.body_model)

    # -- gymnasium API --------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._check_open("reset")
        # Choose first: a choice that fails (unknown episode or scene, bad options) raises
        # before the order, the RNG or the running episode change.
        chosen = self._task.choose(seed, options)
        super().reset(seed=seed)
        self._end_episode("abandoned")
        needs = self._observers.needs
        self._resolve(needs)
        try:
            self._sim.load_scene(chosen.scene_id)
        except SceneNotInstalledError:
            raise scene_not_installed(chosen.scene_id, chosen) from None
        episode = self._task.resolve(chosen, self._sim.scene)
        start, start_yaw = self._task.start_pose(episode)
        start = np.asarray(start, dtype=np.float64)
        seed_ = self._task.episode_seed(episode)
        history = self._sim.reset(
            start, float(start_yaw), seed=seed_, reference=getattr(episode, "reference", None)
        )
        self._task.initialize_episode(episode, self._sim)
        self._obs = self._observe()
        self._phase = _Phase.RUNNING
        if self._observers:
            self._feed.reset(episode, history, start, self._default_ego(self._obs))
        return copy_observation(self._obs), self._task.info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        checked = validated_action(action)  # the one validation, before any state changes
        call = checked if isinstance(checked, SkillCall) else checked.action
        self._check_open("step")
        if self._phase is _Phase.ENDED:
            raise RuntimeError("step() called after the episode ended; call reset()")
        self._sim.check_executable(call)  # a skill the generator lacks: refused, nothing changed
        try:
            return self._step(call, None if checked is call else checked)
        except BaseException as exc:
            self._end_episode("error", error=repr(exc))
            raise

    def _step(
        self, call: SkillCall, decision: Decision | None
    ) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        step_index = self._task.step_count
        if self._observers:
            self._feed.decision(step_index, call, decision)
        if self._task.executes_motion(call):
            if self._observers:
                self._feed.execute(step_index, call)
            else:
                self._sim.execute(call)
            self._obs = self._observe()
        terminated, truncated = self._task.advance(call)
        if self._observers:
            origins = self._feed.step(step_index, call, self._obs, terminated, truncated)
            if terminated or truncated:
                self._end_episode("stop" if terminated else "truncated", origins)
        elif terminated or truncated:
            self._phase = _Phase.ENDED
        return copy_observation(self._obs), 0.0, terminated, truncated, self._task.info()

    def render(self) -> np.ndarray | None:
        """With ``render_mode="rgb_array"``: the 512x512 third-person view of the current state."""
        if self.render_mode is None:
            gym.logger.warn(
                "render() called without render_mode; make the env with render_mode='rgb_array'"
            )
            return None
        self._check_open("render")
        return self._sim.render("exo", EXO_SIZE_PX).rgb

    def close(self) -> None:
        """Release physics, renderer and motion model. Idempotent; safe after a failed reset."""
        if self._phase is _Phase.CLOSED:
            return
        errors: list[BaseException] = []
        for release in (lambda: self._end_episode("abandoned", None), self._sim.close):
            try:
                release()
            except BaseException as exc:  # keep closing
                errors.append(exc)
        self._phase = _Phase.CLOSED
        if errors:
            raise errors[0]

    # -- privileged access (oracle, tests) ------------------------------------------------
    def evaluate(self) -> dict[str, Any]:
        """The task's success rule at the current state, as if the episode stopped now
        (``{"success": bool, ...}``, see the task's ``evaluate``). Hidden state: raises
        unless made with ``privileged=True``."""
        self._check_privileged("evaluate")
        return self._task.evaluate(BodyState(self._sim.snapshot))

    def _check_privileged(self, what: str) -> None:
        if not self._privileged:
            raise PermissionError(
                f"{what}() needs gym.make(..., privileged=True); hidden simulator state"
                " is never available to ordinary policies"
            )
        self._check_open(what)

    def privileged_state(self) -> PrivilegedState:
        """Hidden state for the oracle agent and tests. Raises unless made with ``privileged=True``."""
        self._check_privileged("privileged_state")
        from humanclaw_gym.body import heading_yaw

        snap = self._sim.snapshot()
        frame = snap.realized_frame
        return PrivilegedState(
            episode=self._task.episode,
            scene=self._sim.scene,
            realized_frame=frame,
            root_xz=frame[[0, 2]].copy(),
            yaw_rad=float(heading_yaw(frame[3:6])),
            link_origins=snap.link_origins,
            object_ids=snap.object_ids,
            object_poses=snap.object_poses,
            step=self._task.step_count,
        )

    # -- helpers --------------------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        """Refuse ``what`` on a closed env, and before the first episode started."""
        if self._phase is _Phase.CLOSED:
            raise RuntimeError(f"{what}() called on a closed environment")
        if self._phase is _Phase.NEW and what != "reset":
            raise RuntimeError(f"{what}() called before reset()")

    def _end_episode(self, reason: str, origins: Any = _READ, error: str | None = None) -> None:
        """End a running episode (no-op otherwise) and tell the observers why."""
        if self._phase is not _Phase.RUNNING:
            return
        self._phase = _Phase.ENDED
        if self._observers:
            if origins is _READ:  # the body points, if physics can still give them
                origins = self._sim.safe_link_origins()
            self._feed.end(reason, self._task.step_count, origins, error)

    def _observe(self) -> Any:
        render = self._sim.render
        if "instance" in self._observers.needs:  # the decision's instance image: same pass

            def render(view: str, size: int, modes: frozenset[str], _render=render) -> Any:
                extra = {"instance"} if (view, size) == ("ego", EGO_SIZE_PX) else set()
                return _render(view, size, frozenset(modes) | extra)

        return read_sensors(
            self._sensors,
            render,
            self._task.episode,
            self._sim.scene,
            body=BodyState(self._sim.snapshot),
            task=self._task.public_state(),
        )

    def _default_ego(self, obs: Any) -> np.ndarray | None:
        """The observation when it is exactly the paper's 448 ego RGB image, else None."""
        (first, *rest) = self._sensors
        if rest or not isinstance(first, EgoRGBSensor) or first.size != EGO_SIZE_PX:
            return None
        return obs


def _backend_config(backend: BackendConfig | None, fields: Mapping[str, Any]) -> BackendConfig:
    """``backend`` with the keyword shorthands applied (unknown keywords refused)."""
    unknown = sorted(set(fields) - set(BACKEND_FIELDS))
    if unknown:
        raise TypeError(
            f"HumanClawEnv got unexpected keyword arguments {unknown}; backend keywords "
            f"are {list(BACKEND_FIELDS)}"
        )
    if backend is not None and not isinstance(backend, BackendConfig):
        raise ValueError(f"backend must be a BackendConfig, got {type(backend).__name__}")
    base = backend or BackendConfig()
    return base.replace(**fields) if fields else base
