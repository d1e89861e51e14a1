"""Typed protocols of the three swappable backends: physics, rendering, motion generation.

The env composes one of each. It talks to them only through these methods, so a backend
can be replaced (pybullet -> another engine, moderngl -> TinyRenderer or habitat-sim, the
procedural motion synthesizer -> a learned flow model) without touching task code. Each
backend declares what it can do in a capability record; :mod:`humanclaw_gym.backends.registry`
checks a configuration against those records *before* anything is built.

Shared conventions: world Y up, metres, radians; poses are ``float64 (7,)`` rows
``[x, y, z, qx, qy, qz, qw]`` (quaternion xyzw, object/link frame -> world); humanoid frames
are the 75-D layout of :mod:`humanclaw_gym.body.skeleton`. Arrays returned by a backend are
owned by the caller (fresh copies), never views of backend buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.skills import SkillCall

__all__ = [
    "Camera",
    "MotionCapabilities",
    "MotionGenerator",
    "PhysicsBackend",
    "PhysicsCapabilities",
    "RenderBackend",
    "RenderCapabilities",
    "RenderResult",
]


# --------------------------------------------------------------------------------------
# Physics
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PhysicsCapabilities:
    """What a physics backend supports.

    Attributes:
        name: registry name, e.g. ``"pybullet"``.
        part_shapes: primitive shapes it can collide (``"box"``, ``"cylinder"``, ``"sphere"``).
        scene_features: e.g. ``"dynamic_objects"``, ``"stairs"``.
        contacts: can answer per-frame contact queries (needed by the metrics).
        ray_cast: can cast rays (needed for the spawn-floor rule of the collision metric).
    """

    name: str
    part_shapes: frozenset[str] = frozenset({"box", "cylinder", "sphere"})
    scene_features: frozenset[str] = frozenset({"dynamic_objects", "stairs"})
    contacts: bool = True
    ray_cast: bool = True


@runtime_checkable
class PhysicsBackend(Protocol):
    """Half-physics execution of generated humanoid motion (the frame contract).

    Lifecycle: ``build(scene)`` once per scene; then per episode ``reset(frame)``, and per
    generated 30 Hz frame ``step_frame(frame)``; ``close()`` is idempotent and safe after a
    failed ``build``.
    """

    capabilities: PhysicsCapabilities

    def build(self, scene: SceneSpec) -> None:
        """Create the static world, every dynamic object at its initial pose and the humanoid."""

    def reset(self, frame_75: np.ndarray) -> None:
        """Start an episode: dynamic objects back to their scene poses with zero velocity, the
        humanoid placed exactly at ``frame_75`` (root + every joint), drive state cleared.
        The trajectory after ``reset`` must not depend on earlier episodes."""

    def step_frame(self, frame_75: np.ndarray) -> None:
        """Execute one generated 30 Hz frame (4 substeps of 1/120 s, see the contract)."""

    def realized_frame(self) -> np.ndarray:
        """The humanoid's realized pose as a 75-D frame, ``float64 (75,)``."""

    def link_poses(self) -> np.ndarray:
        """World pose of every humanoid link frame (joint frames), ``float64 (24, 7)``."""

    def link_origins(self) -> np.ndarray:
        """World position of the pelvis, the articulated root and every link origin,
        ``float64 (P, 3)``: the point set of the final-distance metric."""

    @property
    def dynamic_object_ids(self) -> tuple[int, ...]:
        """Scene ids of the dynamic objects, in the row order of :meth:`object_poses`."""

    def object_poses(self) -> np.ndarray:
        """World pose of every dynamic object, ``float64 (M, 7)``."""

    def contacts(self) -> np.ndarray:
        """All current contacts involving the humanoid or a dynamic object (rows with
        :data:`~humanclaw_gym.physics.types.CONTACT_DTYPE`). Computed only when called."""

    def ray_cast_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        """Height of the first scene surface (humanoid excluded) hit by a vertical ray from
        ``from_y`` down to ``to_y`` at ``(x, z)``, or None."""

    def get_state(self) -> object:
        """An opaque snapshot of the whole simulation (for exact forward replay)."""

    def set_state(self, state: object) -> None:
        """Restore a snapshot taken by :meth:`get_state` of the same built scene."""

    def close(self) -> None:
        """Release the simulator. Idempotent."""


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RenderCapabilities:
    """What a render backend supports.

    Attributes:
        name: registry name, e.g. ``"moderngl"`` or ``"tiny"``.
        modes: ``"rgb"`` and/or ``"instance"`` (per-pixel object id image).
        part_shapes: primitive shapes it can draw.
        max_size: largest supported image side in pixels.
    """

    name: str
    modes: frozenset[str] = frozenset({"rgb", "instance"})
    part_shapes: frozenset[str] = frozenset({"box", "cylinder", "sphere", "capsule"})
    max_size: int = 4096


@dataclass(frozen=True)
class Camera:
    """A pinhole camera in the world (Y up). ``forward`` and ``up`` need not be unit length
    but must not be parallel. ``fov_y_deg`` is the vertical field of view."""

    position: tuple[float, float, float]
    forward: tuple[float, float, float]
    up: tuple[float, float, float] = (0.0, 1.0, 0.0)
    fov_y_deg: float = 90.0
    width: int = 448
    height: int = 448
    near_m: float = 0.05
    far_m: float = 50.0


@dataclass(frozen=True)
class RenderResult:
    """Images from one camera. ``rgb`` is ``uint8 (H, W, 3)``; ``instance`` is
    ``int32 (H, W)`` object ids (``-1`` background, ``0`` humanoid, ``>= 1`` scene objects)
    or None when not requested. Row 0 is the top of the image."""

    rgb: np.ndarray
    instance: np.ndarray | None = None
    extras: dict = field(default_factory=dict)


@runtime_checkable
class RenderBackend(Protocol):
    """Rasterises the scene and the humanoid from a camera. Never steps physics."""

    capabilities: RenderCapabilities

    def build(self, scene: SceneSpec) -> None:
        """Upload the scene geometry and the humanoid's link shapes (body.skeleton.link_shapes)."""

    def set_body_pose(self, link_poses: np.ndarray) -> None:
        """Place the humanoid from ``(24, 7)`` link poses."""

    def set_object_poses(self, object_ids: Sequence[int], poses: np.ndarray) -> None:
        """Move dynamic objects (``(M, 7)`` poses, rows aligned with ``object_ids``)."""

    def render(self, camera: Camera, instance: bool = False) -> RenderResult:
        """Draw one image (and the instance image in the same pass when asked)."""

    def close(self) -> None:
        """Release GPU/GL resources. Idempotent."""


# --------------------------------------------------------------------------------------
# Motion generation
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MotionCapabilities:
    """What a motion generator supports.

    Attributes:
        name: registry name, e.g. ``"procedural"`` or ``"flow"``.
        skills: the :class:`~humanclaw_gym.skills.Skill` values it can generate (ints).
        batched: can generate several envs' chunks in one call (``generate_batch``).
    """

    name: str
    skills: frozenset[int] = frozenset(range(8))
    batched: bool = False


@runtime_checkable
class MotionGenerator(Protocol):
    """Turns one SkillCall into 15 world-frame 75-D frames at 30 Hz, autoregressively.

    The generator owns the motion state: the last 5 generated world frames (the history).
    ``reset`` returns the fixed 5-frame standing seed placed at the start pose; each
    ``generate`` continues from the history and rolls its last 5 frames into the next one.
    Deterministic for a given ``seed`` passed to ``reset``.
    """

    capabilities: MotionCapabilities

    def reset(self, start_position: np.ndarray, start_yaw_rad: float, seed: int = 0) -> np.ndarray:
        """Start an episode at a floor position (pelvis x/z, floor y) and yaw; returns the
        ``float64 (5, 75)`` seed history in world frame (standing still)."""

    def generate(self, call: SkillCall) -> np.ndarray:
        """Generate ``float64 (15, 75)`` world frames for a motion skill (not Stop)."""

    def history(self) -> np.ndarray:
        """Copy of the current ``(5, 75)`` history."""
