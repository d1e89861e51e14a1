"""Sensors: what the policy observes, declared as objects.

A sensor names its camera (``view``), its image side (``size``), the render modes it needs
from the renderer (``modes``: ``"rgb"``, ``"instance"``, ``"depth"``, see
:data:`~humanclaw_gym.backends.protocols.RENDER_MODES`), its Gymnasium ``space()`` and how
it turns one render of that camera, keyed by mode, into its array
(``read(result, context)``). The env renders each (view, size) once per observation with
the union of the modes its sensors need, so two sensors of the same camera share one pass:
RGB, depth and instance ids of one observation come from the same rasterisation, never
from a second render.

The env's observation is the single sensor's array when it has one sensor (the default:
:class:`EgoRGBSensor` of the paper's ego size), else a ``Dict`` keyed by ``uuid``. Any
module that needs the observation's image size reads it from the sensor (or from
``env.observation_space``); the paper's camera sizes are
:mod:`humanclaw_gym.image_sizes`. :func:`sensors_for` builds the sensor lists of the env's
``obs_size`` / ``obs_mode`` shorthands.

Write your own by implementing the :class:`Sensor` protocol (frozen dataclasses work well)
and pass it as ``gym.make(..., sensors=[...])``, or register it by name
(:func:`~humanclaw_gym.registry.register_sensor`) and pass the name
(``sensors=["rgb", "gps_compass"]``; a sensor class with a ``size`` is made at the
observation's ``obs_size``). Every sensor reads with a :class:`SensorContext`: the realized
body state (:class:`BodyState`: pelvis position, heading, link poses, read from the
simulation's snapshot only when a sensor reads them) and the task's public state (the
start pose; a point goal in a point-goal task). A *state sensor* declares no render modes
(``modes = frozenset()``, see :class:`StateSensor`): it reads only its context and costs no
render. Ordinary sensors never see hidden simulator state. A sensor that needs the scene or
the episode (which objects are of which class, which are the episode's targets) declares
``privileged = True``; its context then also holds the scene and the episode record, and
the env accepts it only when made with ``privileged=True`` (the benchmark server refuses
that), so such observations are for learning and analysis, never for benchmark runs.

Which sensors are fair in the benchmark: the benchmark observes the 448 ego RGB image
(:class:`EgoRGBSensor`) and nothing else. :class:`EgoDepthSensor`,
:class:`GPSCompassSensor` (start-relative odometry) and :class:`PointGoalSensor` (a goal
given as a vector, point-goal tasks only) are ordinary sensors for learning and for other
tasks, none of them in the default observation; :class:`TargetMaskSensor` is privileged.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from humanclaw_gym import registry
from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX, VIEWS
from humanclaw_gym.registry import register_sensor

if TYPE_CHECKING:  # pragma: no cover
    from gymnasium import spaces

    from humanclaw_gym.backends.protocols import RenderResult
    from humanclaw_gym.scenes.spec import SceneSpec

__all__ = [
    "EGO_SIZE_PX",
    "EXO_SIZE_PX",
    "OBS_MODES",
    "EgoDepthSensor",
    "EgoRGBSensor",
    "BodyState",
    "GPSCompassSensor",
    "PointGoalSensor",
    "PrivilegedSensor",
    "Sensor",
    "SensorContext",
    "StateSensor",
    "TargetMaskSensor",
    "check_sensors",
    "make_sensor",
    "observation_space",
    "read_sensors",
    "renders",
    "sensors_for",
]


OBS_MODES = ("rgb", "rgbd", "rgb+instance")
"""The env's ``obs_mode`` choices (see :func:`sensors_for`)."""


class BodyState:
    """The realized body of the current state, read from the simulation's snapshot on
    first use (a sensor that reads none of it costs no physics query).

    Args:
        snapshot: returns the simulation's :class:`~humanclaw_gym.envs.simulation.Snapshot`
            of the current state (called once, on the first read).

    Attributes (read-only arrays, world frame: Y up, metres, radians):
        realized_frame: ``float64 (75,)`` the realized pose.
        pelvis_position: ``float64 (3,)`` the pelvis (root) position.
        yaw_rad: the heading, 0 facing +Z, positive turning toward +X (the body's left).
        link_poses: ``float64 (L, 7)`` ``[x, y, z, qx, qy, qz, qw]`` of every body link.
        link_origins: ``float64 (P, 3)`` pelvis, articulated root and link origins (the
            final-distance metric's points).
    """

    def __init__(self, snapshot: Callable[[], Any]) -> None:
        self._get = snapshot

    @cached_property
    def _snapshot(self) -> Any:
        return self._get()

    @cached_property
    def realized_frame(self) -> np.ndarray:
        return self._snapshot.realized_frame

    @cached_property
    def pelvis_position(self) -> np.ndarray:
        position = np.array(self.realized_frame[:3], dtype=np.float64)
        position.setflags(write=False)
        return position

    @cached_property
    def yaw_rad(self) -> float:
        from humanclaw_gym.body.skeleton import heading_yaw

        return float(heading_yaw(self.realized_frame[3:6]))

    @cached_property
    def link_poses(self) -> np.ndarray:
        return self._snapshot.link_poses

    @cached_property
    def link_origins(self) -> np.ndarray:
        return self._snapshot.link_origins


@dataclass(frozen=True)
class SensorContext:
    """What a sensor reads besides its render.

    Attributes:
        body: the realized body state (:class:`BodyState`, read lazily); None outside an
            env.
        task: the task's public state (keys: the task spec's ``public_state``: the start
            pose, ``start_position`` and ``start_yaw_rad``; a point-goal task's
            ``goal_position``).
        scene: the simulated :class:`~humanclaw_gym.scenes.spec.SceneSpec` (its objects,
            their ids and categories); None for an ordinary sensor.
        episode: the current episode record (targets included); None for an ordinary
            sensor.

    ``scene`` and ``episode`` are hidden state: only a sensor that declares
    ``privileged = True`` gets them. ``body`` and ``task`` are the agent's own state and
    what the task tells it, given to every sensor.
    """

    scene: SceneSpec | None = None
    episode: Any = None
    body: BodyState | None = None
    task: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Sensor(Protocol):
    """One entry of the observation.

    Attributes:
        uuid: key in a ``Dict`` observation (unique per env).
        view: the camera, ``"ego"`` (head) or ``"exo"`` (third person).
        size: side of the square image rendered for it, in pixels.
        modes: render modes it needs (checked against the renderer's capabilities when
            the env is made).
    """

    uuid: str
    view: str
    size: int
    modes: frozenset[str]

    def space(self) -> spaces.Space:
        """The Gymnasium space of :meth:`read`'s result."""
        ...

    def read(self, result: RenderResult, context: SensorContext) -> np.ndarray:
        """The sensor's array (owned by the caller) from one render of its camera, keyed
        by mode (``result["depth"]``), and its context."""
        ...


@runtime_checkable
class StateSensor(Protocol):
    """An entry of the observation read from state alone, never from an image: no render
    modes (``modes = frozenset()``), so it costs no render; ``view`` and ``size`` are not
    needed. ``read`` gets ``result=None``.

    Attributes:
        uuid: key in a ``Dict`` observation.
        modes: empty.
        task_state: the keys of the task's public state it reads (checked against the
            task's ``spec.public_state`` when the env is made).
    """

    uuid: str
    modes: frozenset[str]

    def space(self) -> spaces.Space: ...

    def read(self, result: None, context: SensorContext) -> np.ndarray: ...


@runtime_checkable
class PrivilegedSensor(Sensor, Protocol):
    """A sensor that reads hidden state besides the image (``privileged = True``): its
    :class:`SensorContext` holds the scene and the episode record. The env accepts it only
    when made with ``privileged=True``."""

    privileged: bool


@register_sensor("rgb", description="the head camera's RGB image (the benchmark's observation)")
@dataclass(frozen=True)
class EgoRGBSensor:
    """The head camera's RGB image, ``uint8 (size, size, 3)``, row 0 at the top."""

    size: int = EGO_SIZE_PX
    uuid: str = "rgb"
    view: str = "ego"
    modes: frozenset[str] = frozenset({"rgb"})

    def space(self) -> spaces.Box:
        from gymnasium import spaces

        return spaces.Box(0, 255, (self.size, self.size, 3), dtype=np.uint8)

    def read(self, result: RenderResult, context: SensorContext) -> np.ndarray:
        return result["rgb"]


@register_sensor("depth", description="the head camera's depth image, metres")
@dataclass(frozen=True)
class EgoDepthSensor:
    """The head camera's depth image, ``float32 (size, size, 1)`` in metres.

    Each pixel is the distance along the camera's viewing axis (eye-space z, not the ray
    length) of the surface seen there, from the renderer's own depth buffer of the RGB
    pass; it lies in ``[EGO_NEAR_M, EGO_FAR_M]`` (0.05 and 50 m, the ego camera's clip
    planes), ``EGO_FAR_M`` where nothing was drawn. The trailing channel axis makes it an
    image for learning libraries (channel-last, like the RGB image).
    """

    size: int = EGO_SIZE_PX
    uuid: str = "depth"
    view: str = "ego"
    modes: frozenset[str] = frozenset({"depth"})

    def space(self) -> spaces.Box:
        from gymnasium import spaces

        from humanclaw_gym.render.cameras import EGO_FAR_M

        return spaces.Box(0.0, EGO_FAR_M, (self.size, self.size, 1), dtype=np.float32)

    def read(self, result: RenderResult, context: SensorContext) -> np.ndarray:
        return result["depth"][:, :, None]


@register_sensor("target_mask", description="pixels of the episode's targets (privileged)")
@dataclass(frozen=True)
class TargetMaskSensor:
    """Where the episode's target instances are in the head camera's image:
    ``uint8 (size, size, 1)``, 1 on pixels of any target instance, else 0.

    Privileged: which objects are targets is hidden state (it amounts to a perfect detector
    of the target category), so the env accepts this sensor only with ``privileged=True``.
    Use it to learn with an auxiliary signal or to analyse policies, never in benchmark
    runs (the benchmark server refuses privileged envs; ``humanclaw run`` observes RGB).
    The mask comes from the instance-id image of the same pass as the RGB image.
    """

    size: int = EGO_SIZE_PX
    uuid: str = "target_mask"
    view: str = "ego"
    modes: frozenset[str] = frozenset({"instance"})
    privileged: bool = True

    def space(self) -> spaces.Box:
        from gymnasium import spaces

        return spaces.Box(0, 1, (self.size, self.size, 1), dtype=np.uint8)

    def read(self, result: RenderResult, context: SensorContext) -> np.ndarray:
        goals = context.episode.goals
        targets = [int(g.object_id) for g in goals if g.object_id is not None]
        return np.isin(result["instance"], targets).astype(np.uint8)[:, :, None]


def _start_frame_xz(vector_xz: np.ndarray, yaw_rad: float) -> tuple[float, float]:
    """A floor-plane world vector ``(dx, dz)`` as ``(forward, left)`` of a body facing
    ``yaw_rad`` (forward ``(sin, cos)``, left ``(cos, -sin)`` in ``(x, z)``)."""
    s, c = math.sin(yaw_rad), math.cos(yaw_rad)
    dx, dz = float(vector_xz[0]), float(vector_xz[1])
    return dx * s + dz * c, dx * c - dz * s


def _wrap(angle_rad: float) -> float:
    """``angle_rad`` in ``(-pi, pi]``."""
    wrapped = math.remainder(angle_rad, 2.0 * math.pi)
    return math.pi if wrapped == -math.pi else wrapped


@register_sensor("gps_compass", description="position and heading relative to the start pose")
@dataclass(frozen=True)
class GPSCompassSensor:
    """Where the body is relative to its start pose: ``float32 (3,)`` =
    ``[forward_m, left_m, heading_rad]``.

    ``forward_m`` / ``left_m``: the pelvis's floor-plane displacement since the start
    position, along the start heading and to its left (metres); ``heading_rad``: the
    current heading minus the start heading, in ``(-pi, pi]``, positive to the left. The
    start pose is the task's public state (``start_position``, ``start_yaw_rad``). A state
    sensor: it reads the body state, never an image, and costs no render. Not in the
    benchmark's observation (odometry the paper's agent does not get).
    """

    uuid: str = "gps_compass"
    modes: frozenset[str] = frozenset()
    task_state: frozenset[str] = frozenset({"start_position", "start_yaw_rad"})

    def space(self) -> spaces.Box:
        from gymnasium import spaces

        return spaces.Box(
            np.array([-np.inf, -np.inf, -np.pi], dtype=np.float32),
            np.array([np.inf, np.inf, np.pi], dtype=np.float32),
            dtype=np.float32,
        )

    def read(self, result: None, context: SensorContext) -> np.ndarray:
        start = np.asarray(context.task["start_position"], dtype=np.float64)
        start_yaw = float(context.task["start_yaw_rad"])
        body = context.body
        moved = body.pelvis_position[[0, 2]] - start[[0, 2]]
        forward, left = _start_frame_xz(moved, start_yaw)
        heading = _wrap(body.yaw_rad - start_yaw)
        return np.array([forward, left, heading], dtype=np.float32)


@register_sensor("pointgoal", description="distance and direction to the goal (point-goal tasks)")
@dataclass(frozen=True)
class PointGoalSensor:
    """Where the goal is from the body: ``float32 (2,)`` = ``[distance_m, angle_rad]``.

    ``distance_m``: floor-plane distance from the pelvis to the goal position (metres);
    ``angle_rad``: its direction relative to the current heading, in ``(-pi, pi]``,
    positive to the left. It reads the task's public ``goal_position``, which only a
    point-goal task exposes (the env refuses the sensor for any other task, e.g. the
    benchmark's, whose goal is an object category to find). A state sensor: no render.
    """

    uuid: str = "pointgoal"
    modes: frozenset[str] = frozenset()
    task_state: frozenset[str] = frozenset({"goal_position"})

    def space(self) -> spaces.Box:
        from gymnasium import spaces

        return spaces.Box(
            np.array([0.0, -np.pi], dtype=np.float32),
            np.array([np.inf, np.pi], dtype=np.float32),
            dtype=np.float32,
        )

    def read(self, result: None, context: SensorContext) -> np.ndarray:
        goal = np.asarray(context.task["goal_position"], dtype=np.float64)
        body = context.body
        forward, left = _start_frame_xz(goal[[0, 2]] - body.pelvis_position[[0, 2]], body.yaw_rad)
        angle = _wrap(math.atan2(left, forward)) if (forward or left) else 0.0
        return np.array([math.hypot(forward, left), angle], dtype=np.float32)


def make_sensor(sensor: Any, size: int = EGO_SIZE_PX) -> Any:
    """A sensor from a registered name (made at ``size`` when its class takes a ``size``,
    else with its defaults), or ``sensor`` itself when it is not a string.

    Raises:
        ValueError: an unknown name (the registered sensors are listed).
    """
    if not isinstance(sensor, str):
        return sensor
    try:
        cls = registry.load("sensor", sensor)
    except registry.RegistryError:
        known = ", ".join(registry.names("sensor")) or "none"
        raise ValueError(f"unknown sensor {sensor!r}; registered: {known}") from None
    if not callable(cls):
        return cls  # a registered sensor instance
    try:
        takes_size = "size" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        takes_size = False
    return cls(size=size) if takes_size else cls()


def sensors_for(obs_mode: str = "rgb", obs_size: int = EGO_SIZE_PX) -> tuple[Any, ...]:
    """The sensors of the env's ``obs_mode`` / ``obs_size`` shorthands.

    The ego camera is rendered directly at ``obs_size`` (no resizing).

    * ``"rgb"``: one :class:`EgoRGBSensor` (the observation is its ``Box``);
    * ``"rgbd"``: ``Dict(rgb=uint8 (S, S, 3), depth=float32 (S, S, 1) metres)``;
    * ``"rgb+instance"``: ``Dict(rgb=..., target_mask=uint8 (S, S, 1))``, privileged
      (:class:`TargetMaskSensor`).

    Raises:
        ValueError: an unknown mode or a size outside 16..4096.
    """
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode={obs_mode!r} is invalid: allowed {OBS_MODES}")
    if isinstance(obs_size, bool) or not isinstance(obs_size, int) or not 16 <= obs_size <= 4096:
        raise ValueError(f"obs_size={obs_size!r} is out of range: allowed an int in 16..4096")
    rgb = EgoRGBSensor(size=obs_size)
    if obs_mode == "rgbd":
        return (rgb, EgoDepthSensor(size=obs_size))
    if obs_mode == "rgb+instance":
        return (rgb, TargetMaskSensor(size=obs_size))
    return (rgb,)


def is_privileged(sensor: Any) -> bool:
    """True for a sensor that declares ``privileged = True`` (reads hidden state)."""
    return getattr(sensor, "privileged", False) is True


def renders(sensor: Any) -> bool:
    """Whether ``sensor`` needs a render (it declares render modes)."""
    return bool(getattr(sensor, "modes", None))


def check_sensors(
    sensors: Sequence[Any],
    privileged: bool = False,
    public_state: Sequence[str] | None = None,
) -> tuple[Any, ...]:
    """Validate a sensor list; returns it as a tuple.

    Args:
        sensors: the candidate sensors.
        privileged: whether the env is privileged (privileged sensors need it).
        public_state: the keys of the task's public state (None: not checked); a sensor's
            ``task_state`` must be among them.

    Raises:
        ValueError: empty, a duplicate ``uuid``, an unknown view, a size outside 16..4096,
            an object that is not a :class:`Sensor` / :class:`StateSensor`, or a sensor
            reading task state the task does not expose (naming the offending entry).
        PermissionError: a privileged sensor in an env that is not privileged.
    """
    items = tuple(sensors)
    if not items:
        raise ValueError("sensors must hold at least one sensor")
    seen: set[str] = set()
    for i, sensor in enumerate(items):
        image = renders(sensor)
        if not (isinstance(sensor, Sensor) if image else isinstance(sensor, StateSensor)):
            raise ValueError(
                f"sensors[{i}]={sensor!r} is not a Sensor (needs uuid, view, size, modes, "
                "space(), read(result, context); a state sensor: uuid, modes=frozenset(), "
                "space(), read(None, context))"
            )
        if not isinstance(sensor.uuid, str) or not sensor.uuid or sensor.uuid in seen:
            raise ValueError(f"sensors[{i}].uuid={sensor.uuid!r} must be a new non-empty str")
        seen.add(sensor.uuid)
        if image:
            if sensor.view not in VIEWS:
                raise ValueError(f"sensors[{i}].view={sensor.view!r} is invalid: allowed {VIEWS}")
            size = sensor.size
            if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 4096:
                raise ValueError(f"sensors[{i}].size={size!r} is out of range: allowed 16..4096")
        wanted = set(getattr(sensor, "task_state", ()) or ())
        if public_state is not None and not wanted <= set(public_state):
            raise ValueError(
                f"sensors[{i}] ({sensor.uuid!r}, {type(sensor).__name__}) reads task state "
                f"{sorted(wanted - set(public_state))} that this task does not expose (its "
                f"public state: {', '.join(public_state) or 'none'})"
            )
        if is_privileged(sensor) and not privileged:
            raise PermissionError(
                f"sensors[{i}] ({sensor.uuid!r}, {type(sensor).__name__}) reads hidden state: "
                "make the env with privileged=True (learning and analysis only; benchmark "
                "runs refuse privileged envs)"
            )
    return items


def observation_space(sensors: Sequence[Any]) -> spaces.Space:
    """The observation space: the one sensor's space, or a ``Dict`` keyed by uuid."""
    if len(sensors) == 1:
        return sensors[0].space()
    from gymnasium import spaces

    return spaces.Dict({s.uuid: s.space() for s in sensors}, sort_keys=False)


def read_sensors(
    sensors: Sequence[Any],
    render: Callable[[str, int, frozenset[str]], RenderResult],
    episode: Any = None,
    scene: SceneSpec | None = None,
    body: BodyState | None = None,
    task: Mapping[str, Any] | None = None,
) -> Any:
    """Read every sensor, rendering each (view, size) of the image sensors once with the
    union of its modes; a state sensor (no modes) renders nothing.

    Args:
        sensors: the env's sensors.
        render: ``render(view, size, modes) -> RenderResult``.
        episode: the current episode record, in privileged sensors' context only.
        scene: the simulated scene, in privileged sensors' context only.
        body: the realized body state (every sensor's context).
        task: the task's public state (every sensor's context).

    Returns:
        The one sensor's array, or a dict ``{uuid: array}``.
    """
    needed: dict[tuple[str, int], set[str]] = {}
    for s in sensors:
        if renders(s):
            needed.setdefault((s.view, s.size), set()).update(s.modes)
    results = {key: render(key[0], key[1], frozenset(modes)) for key, modes in needed.items()}
    public = {} if task is None else task
    ordinary = SensorContext(body=body, task=public)
    hidden = SensorContext(scene=scene, episode=episode, body=body, task=public)
    arrays = {
        s.uuid: s.read(
            results[(s.view, s.size)] if renders(s) else None,
            hidden if is_privileged(s) else ordinary,
        )
        for s in sensors
    }
    if len(sensors) == 1:
        return arrays[sensors[0].uuid]
    return arrays
