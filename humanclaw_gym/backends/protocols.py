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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from humanclaw_gym.image_sizes import EGO_SIZE_PX

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.skills import SkillCall

__all__ = [
    "BodyMeshRenderBackend",
    "RENDER_MODES",
    "Camera",
    "MotionCapabilities",
    "MotionGenerator",
    "PhysicsBackend",
    "PhysicsCapabilities",
    "RenderBackend",
    "RenderBackendUnavailable",
    "RenderCapabilities",
    "RenderResult",
    "check_body_mesh",
    "check_render_modes",
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

    Construction takes keyword options only (``BackendConfig.physics_options``; e.g.
    pybullet's ``solver_iterations``); their names are checked against the constructor
    before anything is built, and :meth:`contract` records them.

    Optional: ``step_frames(frames)`` with ``float64 (n, 75)`` frames, equal to
    ``step_frame`` on each row in order (:class:`~humanclaw_gym.physics.base.HalfPhysicsBase`
    implements it; the MuJoCo backend runs it in one call without the GIL). The simulation uses it for a whole chunk when no observer needs the state after
    every frame. ``record_frames(frames, *, contacts, contact_parts)`` returns a
    :class:`~humanclaw_gym.physics.types.FrameStates` with the state after each frame
    (realized pose, object poses, contact rows), the same as those readouts after each
    ``step_frame``; the simulation uses it when observers need those states but no image
    of each frame (:class:`~humanclaw_gym.physics.base.HalfPhysicsBase` implements it).
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

    def contacts(self, parts: bool = True) -> np.ndarray:
        """All current contacts involving the humanoid or a dynamic object (rows with
        :data:`~humanclaw_gym.physics.types.CONTACT_DTYPE`). Computed only when called; the
        objects' part indices (their ``link`` fields) only with ``parts``, else -1."""

    def ray_cast_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        """Height of the first scene surface (humanoid excluded) hit by a vertical ray from
        ``from_y`` down to ``to_y`` at ``(x, z)``, or None."""

    def contract(self) -> dict:
        """This instance's frame contract and tuning as a JSON-ready dict, recorded in
        every replay manifest. It must hold ``"backend"`` (the registry name) and every
        constructor option that changes results, under the constructor parameter's name:
        forward replay rebuilds the backend from the entries whose names match its
        constructor's parameters."""

    def get_state(self) -> object:
        """An opaque snapshot of the whole simulation (for exact forward replay)."""

    def set_state(self, state: object) -> None:
        """Restore a snapshot taken by :meth:`get_state` of the same built scene."""

    def close(self) -> None:
        """Release the simulator. Idempotent."""


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------
#: The render modes a backend may produce, each from the same rasterisation pass as the RGB
#: image, and the array each gives (row 0 is the top of the image). A backend that adds a
#: mode lists it in its capabilities and returns it under its name; nothing else changes.
RENDER_MODES: dict[str, str] = {
    "rgb": "uint8 (H, W, 3), always drawn",
    "instance": "int32 (H, W) object ids: -1 background, 0 the humanoid, >= 1 scene objects",
    "depth": (
        "float32 (H, W) metres along the camera's viewing axis (eye-space z, not the ray "
        "length) of the surface seen at each pixel, in [near_m, far_m]; far_m where nothing "
        "was drawn"
    ),
}


@dataclass(frozen=True)
class RenderCapabilities:
    """What a render backend supports.

    Attributes:
        name: registry name, e.g. ``"moderngl"`` or ``"tiny"``.
        modes: the render modes it produces (see :data:`RENDER_MODES`: ``"rgb"``,
            ``"instance"``, ``"depth"``), each from the same pass.
        part_shapes: primitive shapes it can draw.
        max_size: largest supported image side in pixels.
        body_mesh: can draw a triangle mesh in place of the humanoid's link shapes (it
            implements :class:`BodyMeshRenderBackend`); needed by ``body_model_dir``.
    """

    name: str
    modes: frozenset[str] = frozenset({"rgb", "instance"})
    part_shapes: frozenset[str] = frozenset({"box", "cylinder", "sphere", "capsule"})
    max_size: int = 4096
    body_mesh: bool = False


@dataclass(frozen=True)
class Camera:
    """A pinhole camera in the world (Y up). ``forward`` and ``up`` need not be unit length
    but must not be parallel. ``fov_y_deg`` is the vertical field of view."""

    position: tuple[float, float, float]
    forward: tuple[float, float, float]
    up: tuple[float, float, float] = (0.0, 1.0, 0.0)
    fov_y_deg: float = 90.0
    width: int = EGO_SIZE_PX
    height: int = EGO_SIZE_PX
    near_m: float = 0.05
    far_m: float = 50.0


class RenderResult(Mapping[str, np.ndarray]):
    """The images of one camera from one rasterisation pass, keyed by render mode.

    ``result["depth"]``, ``"instance" in result``, ``result.get(mode)``; the arrays are
    those of :data:`RENDER_MODES`. ``"rgb"`` is always present; another mode is present
    exactly when it was asked for. Built as ``RenderResult(rgb=..., depth=...)`` or from a
    mapping (modes given as None are left out). :attr:`rgb`, :attr:`instance` and
    :attr:`depth` are shorthands (None for a mode not rendered).

    Raises:
        ValueError: no ``"rgb"`` image.
    """

    __slots__ = ("_images",)

    def __init__(self, images: Mapping[str, Any] | None = None, /, **by_mode: Any) -> None:
        merged = {**(images or {}), **by_mode}
        self._images = {mode: array for mode, array in merged.items() if array is not None}
        if "rgb" not in self._images:
            raise ValueError(f"a RenderResult always holds 'rgb'; got modes {sorted(merged)}")

    def __getitem__(self, mode: str) -> np.ndarray:
        try:
            return self._images[mode]
        except KeyError:
            raise KeyError(
                f"render mode {mode!r} was not rendered; this result holds {sorted(self._images)}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._images)

    def __len__(self) -> int:
        return len(self._images)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{m}={a.dtype}{tuple(a.shape)}" for m, a in self._images.items())
        return f"RenderResult({shapes})"

    @property
    def rgb(self) -> np.ndarray:
        return self._images["rgb"]

    @property
    def instance(self) -> np.ndarray | None:
        return self._images.get("instance")

    @property
    def depth(self) -> np.ndarray | None:
        return self._images.get("depth")


def check_render_modes(modes: Iterable[str], capabilities: RenderCapabilities) -> frozenset[str]:
    """The modes a :meth:`RenderBackend.render` call draws: ``modes`` plus ``"rgb"``.

    Raises:
        ValueError: a mode the backend does not declare (naming it and the allowed ones).
    """
    if isinstance(modes, str):
        raise ValueError(f"modes must be a set of render modes, got the string {modes!r}")
    wanted = frozenset(modes) | {"rgb"}
    missing = sorted(wanted - capabilities.modes)
    if missing:
        raise ValueError(
            f"render backend {capabilities.name!r} cannot render modes {missing}: allowed "
            f"{sorted(capabilities.modes)}"
        )
    return wanted


class RenderBackendUnavailable(RuntimeError):
    """A render backend cannot run in this process (missing package, no EGL/GL driver).

    Raised by a render backend's constructor; the message names the missing piece and how
    to install it. ``registry.create_renderer("auto")`` catches exactly this exception to
    fall back to the next backend. Other exceptions (bugs, bad arguments) are never
    swallowed.
    """


@runtime_checkable
class RenderBackend(Protocol):
    """Rasterises the scene and the humanoid from a camera. Never steps physics.

    The humanoid is drawn from its link shapes. A backend whose capabilities declare
    ``body_mesh=True`` also implements :class:`BodyMeshRenderBackend`, the optional
    extension that draws a skinned triangle mesh instead.
    """

    capabilities: RenderCapabilities

    def build(self, scene: SceneSpec) -> None:
        """Upload the scene geometry and the humanoid's link shapes (body.skeleton.link_shapes)."""

    def set_body_pose(self, link_poses: np.ndarray) -> None:
        """Place the humanoid from ``(24, 7)`` link poses."""

    def set_object_poses(self, object_ids: Sequence[int], poses: np.ndarray) -> None:
        """Move dynamic objects (``(M, 7)`` poses, rows aligned with ``object_ids``)."""

    def render(self, camera: Camera, modes: Iterable[str] = frozenset({"rgb"})) -> RenderResult:
        """Draw one image of ``camera``, with every image of ``modes`` (see
        :data:`RENDER_MODES`; ``"rgb"`` is always drawn) from the same pass; a mode the
        backend does not declare raises ``ValueError`` before anything is drawn
        (:func:`check_render_modes`)."""

    def close(self) -> None:
        """Release GPU/GL resources. Idempotent."""


@runtime_checkable
class BodyMeshRenderBackend(RenderBackend, Protocol):
    """A :class:`RenderBackend` that can draw the humanoid as a triangle mesh
    (``capabilities.body_mesh`` is True), e.g. the skinned SMPL-X body.

    Rule: once :meth:`set_body_mesh` has been called, every image shows the mesh and none
    of the link shapes, until :meth:`clear_body_mesh` or the next ``build``. Meanwhile
    ``set_body_pose`` still records the link poses (a backend may use them, e.g. for the
    exo cutaway) but does not bring the link shapes back. Mesh pixels are the humanoid's:
    id 0 in the instance image, drawn in the body colour with the body's shading.
    """

    def set_body_mesh(self, vertices: np.ndarray, faces: np.ndarray | None = None) -> None:
        """Draw the humanoid as this mesh from now on.

        Args:
            vertices: ``(V, 3)`` world positions in metres (Y up), float32 preferred (any
                float dtype is converted), finite.
            faces: ``(F, 3)`` integer vertex indices in ``[0, V)``, counter-clockwise seen
                from outside (back faces are culled). Give them on the first call after
                ``build`` / :meth:`clear_body_mesh` and whenever the topology changes;
                ``None`` keeps the previous faces (then ``V`` must not change).

        The backend copies both arrays; the caller may reuse its buffers. Invalid input
        raises ``ValueError`` (see :func:`check_body_mesh`) before anything changes.
        """

    def clear_body_mesh(self) -> None:
        """Forget the mesh (faces too) and draw the link shapes again (once posed)."""


def check_body_mesh(
    vertices: np.ndarray, faces: np.ndarray | None, previous_num_vertices: int | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate a :meth:`BodyMeshRenderBackend.set_body_mesh` call; nothing is changed.

    Args:
        vertices: the candidate ``(V, 3)`` vertices.
        faces: the candidate ``(F, 3)`` faces, or None to keep the previous ones.
        previous_num_vertices: ``V`` of the faces currently set, None when there are none.

    Returns:
        ``(vertices float32 (V, 3) C-contiguous copy, faces int32 (F, 3) copy or None)``.

    Raises:
        ValueError: naming the field, the offending value and what is allowed.
    """
    arr = np.asarray(vertices)
    if arr.dtype.kind != "f":
        raise ValueError(f"vertices must have a float dtype (float32 preferred), got {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] < 3:
        raise ValueError(f"vertices must have shape (V, 3) with V >= 3, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.argwhere(~np.isfinite(arr))[0, 0])
        raise ValueError(f"vertices must be finite (metres), row {bad} is {arr[bad].tolist()}")
    num_vertices = arr.shape[0]
    verts = np.array(arr, dtype=np.float32, order="C", copy=True)
    if faces is None:
        if previous_num_vertices is None:
            raise ValueError(
                "faces=None keeps the previous faces, but none are set: pass faces (F, 3) "
                "on the first set_body_mesh call after build() / clear_body_mesh()"
            )
        if num_vertices != previous_num_vertices:
            raise ValueError(
                f"vertices has {num_vertices} rows but the faces set earlier index "
                f"{previous_num_vertices} vertices: pass faces again when the topology changes"
            )
        return verts, None
    tri = np.asarray(faces)
    if tri.dtype.kind not in "iu":
        raise ValueError(f"faces must have an integer dtype, got {tri.dtype}")
    if tri.ndim != 2 or tri.shape[1] != 3 or tri.shape[0] < 1:
        raise ValueError(f"faces must have shape (F, 3) with F >= 1, got {tri.shape}")
    lo, hi = int(tri.min()), int(tri.max())
    if lo < 0 or hi >= num_vertices:
        value = lo if lo < 0 else hi
        raise ValueError(
            f"faces index vertex {value}, outside the allowed range [0, {num_vertices - 1}] "
            f"(V = {num_vertices} vertices)"
        )
    return verts, np.array(tri, dtype=np.int32, order="C", copy=True)


# --------------------------------------------------------------------------------------
# Motion generation
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MotionCapabilities:
    """What a motion generator supports.

    Attributes:
        name: registry name, e.g. ``"procedural"`` or ``"flow"``.
        motion_keys: the motions it can execute, by the skill table's ``motion_key``
            (``"walk_forward"``, ``"turn"``, ...; default: those of the built-in skills,
            :data:`~humanclaw_gym.skills.BUILTIN_MOTION_KEYS`). A skill is executed when its
            ``motion_key`` is here; a terminal skill (Stop/Stand) produces no motion and
            needs none. Keys, not skill ids: ids are given out in registration order.
        batched: can generate several envs' chunks in one call (``generate_batch``).
        fits_body: poses a body asset with its own proportions: the env hands it the
            loaded body as ``body_asset=`` (a :class:`~humanclaw_gym.body.asset.BodyAsset`)
            when one is configured; otherwise its frames are the built-in body's.
    """

    name: str
    motion_keys: frozenset[str] = field(default_factory=lambda: _builtin_motion_keys())
    batched: bool = False
    fits_body: bool = False

    def __post_init__(self) -> None:
        keys = self.motion_keys
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise TypeError(
                f"MotionCapabilities({self.name!r}).motion_keys must be a set of motion-key "
                f"strings (the skill table's motion_key), got {keys!r}"
            )
        object.__setattr__(self, "motion_keys", frozenset(keys))

    def executes(self, skill: Any) -> bool:
        """Whether it executes ``skill`` (a :class:`~humanclaw_gym.skills.Skill`, its id
        or a name): a terminal skill always, another when its motion key is declared."""
        from humanclaw_gym.skills import skill_spec

        spec = skill_spec(skill)
        return spec.terminal or spec.motion_key in self.motion_keys

    @property
    def skills(self) -> frozenset[int]:
        """The ids of the registered skills it executes (read from the current table)."""
        from humanclaw_gym.skills import Skill

        return frozenset(int(s) for s in Skill if self.executes(s))

    def check_call(self, call: SkillCall) -> None:
        """Refuse a call it cannot execute, before anything changes.

        Raises:
            SkillNotExecutableError: naming the skill, this generator and the skills it
                executes.
        """
        if self.executes(call.skill):
            return
        from humanclaw_gym.skills import Skill, SkillNotExecutableError

        allowed = ", ".join(s.text_name for s in Skill if self.executes(s))
        raise SkillNotExecutableError(call, self.name, allowed, skill=call.skill)


def _builtin_motion_keys() -> frozenset[str]:
    from humanclaw_gym.skills import BUILTIN_MOTION_KEYS

    return BUILTIN_MOTION_KEYS


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
