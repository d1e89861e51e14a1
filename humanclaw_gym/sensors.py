"""Sensors: what the policy observes, declared as objects.

A sensor names its camera (``view``), its image side (``size``), the render modes it needs
from the renderer (``modes``: ``"rgb"``, ``"instance"``, ...), its Gymnasium ``space()`` and
how it turns one render of that camera into its array (``read``). The env renders each
(view, size) once per observation with the union of the modes its sensors need, so two
sensors of the same camera share one pass.

The env's observation is the single sensor's array when it has one sensor (the default:
:class:`EgoRGBSensor`, ``uint8 (448, 448, 3)``), else a ``Dict`` keyed by ``uuid``. Any
module that needs the observation's image size reads it from the sensor (or from
``env.observation_space``), never from a constant.

Write your own by implementing the :class:`Sensor` protocol (frozen dataclasses work well)
and pass it as ``gym.make(..., sensors=[...])``. Sensors see only rendered images, never
hidden simulator state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from gymnasium import spaces

    from humanclaw_gym.backends.protocols import RenderResult

__all__ = [
    "EGO_SIZE_PX",
    "EXO_SIZE_PX",
    "EgoRGBSensor",
    "Sensor",
    "check_sensors",
    "observation_space",
    "read_sensors",
]

EGO_SIZE_PX = 448
"""Side of the paper's ego camera image (the default observation, the Find metric's
semantic image and the ego video)."""

EXO_SIZE_PX = 512
"""Side of the paper's third-person (exo) camera image (``render()``, the exo video)."""

VIEWS = ("ego", "exo")


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

    def read(self, result: RenderResult) -> np.ndarray:
        """The sensor's array from one render of its camera (owned by the caller)."""
        ...


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

    def read(self, result: RenderResult) -> np.ndarray:
        return result.rgb


def check_sensors(sensors: Sequence[Any]) -> tuple[Any, ...]:
    """Validate a sensor list; returns it as a tuple.

    Raises:
        ValueError: empty, a duplicate ``uuid``, an unknown view, a size outside 16..4096,
            or an object that is not a :class:`Sensor` (naming the offending entry).
    """
    items = tuple(sensors)
    if not items:
        raise ValueError("sensors must hold at least one sensor")
    seen: set[str] = set()
    for i, sensor in enumerate(items):
        if not isinstance(sensor, Sensor):
            raise ValueError(
                f"sensors[{i}]={sensor!r} is not a Sensor (needs uuid, view, size, modes, "
                "space(), read(result))"
            )
        if not isinstance(sensor.uuid, str) or not sensor.uuid or sensor.uuid in seen:
            raise ValueError(f"sensors[{i}].uuid={sensor.uuid!r} must be a new non-empty str")
        seen.add(sensor.uuid)
        if sensor.view not in VIEWS:
            raise ValueError(f"sensors[{i}].view={sensor.view!r} is invalid: allowed {VIEWS}")
        size = sensor.size
        if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 4096:
            raise ValueError(f"sensors[{i}].size={size!r} is out of range: allowed 16..4096")
    return items


def observation_space(sensors: Sequence[Any]) -> spaces.Space:
    """The observation space: the one sensor's space, or a ``Dict`` keyed by uuid."""
    if len(sensors) == 1:
        return sensors[0].space()
    from gymnasium import spaces

    return spaces.Dict({s.uuid: s.space() for s in sensors}, sort_keys=False)


def read_sensors(
    sensors: Sequence[Any], render: Callable[[str, int, frozenset[str]], RenderResult]
) -> Any:
    """Read every sensor, rendering each (view, size) once with the union of its modes.

    Args:
        sensors: the env's sensors.
        render: ``render(view, size, modes) -> RenderResult``.

    Returns:
        The one sensor's array, or a dict ``{uuid: array}``.
    """
    needed: dict[tuple[str, int], set[str]] = {}
    for s in sensors:
        needed.setdefault((s.view, s.size), set()).update(s.modes)
    results = {key: render(key[0], key[1], frozenset(modes)) for key, modes in needed.items()}
    arrays = {s.uuid: s.read(results[(s.view, s.size)]) for s in sensors}
    if len(sensors) == 1:
        return arrays[sensors[0].uuid]
    return arrays
