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
and pass it as ``gym.make(..., sensors=[...])``. Every sensor reads with a
:class:`SensorContext`. Ordinary sensors see only rendered images, never hidden simulator
state: their context is empty. A sensor that needs the scene or the episode (which objects
are of which class, which are the episode's targets) declares ``privileged = True``; its
context then holds the scene and the episode record, and the env accepts it only when made
with ``privileged=True`` (the benchmark server refuses that), so such observations are for
learning and analysis, never for benchmark runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX, VIEWS

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
    "PrivilegedSensor",
    "Sensor",
    "SensorContext",
    "TargetMaskSensor",
    "check_sensors",
    "observation_space",
    "read_sensors",
    "sensors_for",
]


OBS_MODES = ("rgb", "rgbd", "rgb+instance")
"""The env's ``obs_mode`` choices (see :func:`sensors_for`)."""


@dataclass(frozen=True)
class SensorContext:
    """What a sensor reads besides its render.

    Attributes:
        scene: the simulated :class:`~humanclaw_gym.scenes.spec.SceneSpec` (its objects,
            their ids and categories); None for an ordinary sensor.
        episode: the current episode record (targets included); None for an ordinary
            sensor.

    Both are hidden state: only a sensor that declares ``privileged = True`` gets them.
    """

    scene: SceneSpec | None = None
    episode: Any = None


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
class PrivilegedSensor(Sensor, Protocol):
    """A sensor that reads hidden state besides the image (``privileged = True``): its
    :class:`SensorContext` holds the scene and the episode record. The env accepts it only
    when made with ``privileged=True``."""

    privileged: bool


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


def check_sensors(sensors: Sequence[Any], privileged: bool = False) -> tuple[Any, ...]:
    """Validate a sensor list; returns it as a tuple.

    Args:
        sensors: the candidate sensors.
        privileged: whether the env is privileged (privileged sensors need it).

    Raises:
        ValueError: empty, a duplicate ``uuid``, an unknown view, a size outside 16..4096,
            or an object that is not a :class:`Sensor` (naming the offending entry).
        PermissionError: a privileged sensor in an env that is not privileged.
    """
    items = tuple(sensors)
    if not items:
        raise ValueError("sensors must hold at least one sensor")
    seen: set[str] = set()
    for i, sensor in enumerate(items):
        if not isinstance(sensor, Sensor):
            raise ValueError(
                f"sensors[{i}]={sensor!r} is not a Sensor (needs uuid, view, size, modes, "
                "space(), read(result, context))"
            )
        if not isinstance(sensor.uuid, str) or not sensor.uuid or sensor.uuid in seen:
            raise ValueError(f"sensors[{i}].uuid={sensor.uuid!r} must be a new non-empty str")
        seen.add(sensor.uuid)
        if sensor.view not in VIEWS:
            raise ValueError(f"sensors[{i}].view={sensor.view!r} is invalid: allowed {VIEWS}")
        size = sensor.size
        if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 4096:
            raise ValueError(f"sensors[{i}].size={size!r} is out of range: allowed 16..4096")
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
) -> Any:
    """Read every sensor, rendering each (view, size) once with the union of its modes.

    Args:
        sensors: the env's sensors.
        render: ``render(view, size, modes) -> RenderResult``.
        episode: the current episode record, in privileged sensors' context only.
        scene: the simulated scene, in privileged sensors' context only.

    Returns:
        The one sensor's array, or a dict ``{uuid: array}``.
    """
    needed: dict[tuple[str, int], set[str]] = {}
    for s in sensors:
        needed.setdefault((s.view, s.size), set()).update(s.modes)
    results = {key: render(key[0], key[1], frozenset(modes)) for key, modes in needed.items()}
    ordinary, hidden = SensorContext(), SensorContext(scene=scene, episode=episode)
    arrays = {
        s.uuid: s.read(results[(s.view, s.size)], hidden if is_privileged(s) else ordinary)
        for s in sensors
    }
    if len(sensors) == 1:
        return arrays[sensors[0].uuid]
    return arrays
