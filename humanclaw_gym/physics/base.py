"""The half of every half-physics backend that is not engine calls: :class:`HalfPhysicsBase`.

The backends (:mod:`.pybullet_backend`, :mod:`.mujoco_backend`) implement the frame contract
of :mod:`.contract` with different engines around the same bookkeeping. The base holds that
bookkeeping once:

* the body the backend builds, as data (:class:`~humanclaw_gym.body.model.BodyModel`: links,
  joint tree, shapes and masses); the backends build their humanoid from ``self.body``;
* the constructor keywords, declared once (:attr:`HalfPhysicsBase.options`, a tuple of
  :class:`PhysicsOption`): the eleven every backend shares (:data:`BASE_OPTIONS`) and any a
  backend adds (:func:`physics_options`). The base takes them, checks them (the drive
  tuning by :func:`~.contract.check_drive_tuning`), keeps each as the public attribute of its
  name, and reads the same declaration for the env's ``physics_options`` check, the
  :meth:`~HalfPhysicsBase.contract` record and forward replay; a backend's constructor
  takes ``**options`` and passes them on, and each joint's torque cap follows;
* the lifecycle (``build``, ``close``, ``reset``, ``step_frame(s)``, ``record_frames``,
  ``get_state`` / ``set_state`` around the engine hooks below): the episode counter, the
  "built" / "episode started" guards, the checks of frames, ray arguments and snapshots
  before anything changes;
* the readouts that only read the realized state (:meth:`realized_frame`,
  :meth:`link_origins`, :attr:`dynamic_object_ids`) and the :meth:`contract` record.

A backend subclasses it, declares ``capabilities``, and implements its engine calls. The
base owns its state (:data:`BASE_STATE`: the body, the options, the scene, the episode
counter and guard, the dynamic object ids, the realized state): its own methods write it,
a backend only reads it. Each hook returns what it read instead of storing it:

==============================  =================================================================
hook                            what the backend does
==============================  =================================================================
``_build_engine(scene)``        create the engine's world (``self.body`` parked at
                                :data:`PARK_POSITION`, the scene's objects); returns the dynamic
                                objects' scene ids in scene order (the rows of ``object_poses``)
``_close_engine()``             release the engine's world; idempotent, safe after a failed
                                ``_build_engine``
``_reset_engine(frame)``        place the humanoid at a checked frame at rest, objects back,
                                drives cleared; returns the realized state
``_step_engine(frame)``         drives and 4 substeps of one checked frame; returns the
                                realized state
``_ray_down(x, z, y0, y1)``     the engine's downward ray (checked floats)
``_snapshot()``                 a :class:`PhysicsSnapshot` subclass of the engine and drive state
``_snapshot_live(state)``       (optional) whether the engine still holds that snapshot
``_restore(state)``             restore a checked snapshot; returns the realized state
``_contract_engine()``          the engine's own contract entries (mechanics and constants)
``link_poses`` ...              ``object_poses``, ``contacts(parts)``: engine readouts
``_step_engine_frames(rows)``   (optional) checked frames in one go, the state after the last
                                returned (default: ``_step_engine`` row by row)
``_record_engine(rows, ...)``   (optional) checked frames with the state after each, read more
                                cheaply than frame by frame (:class:`RecordedFrames`)
``_frame_contacts(parts)``      (optional) the contact query of one recorded frame, in any form
``_contact_batch(...)``         (optional) those of a chunk as rows, converted together
==============================  =================================================================

The realized state a hook returns is a :class:`RealizedState` (or any pair): the root joint's
world position ``float64 (3,)`` and ``float64 (L, 4)`` xyzw link rotations (row 0 the root's
world rotation, rows ``1..`` each joint's rotation relative to its parent). The base keeps a
copy (``self._real_pos`` / ``self._real_rot``) for the readouts and for the next frame's
drives to read. The drive state of a backend (its previous generated frame, its joint
commands, the frames since reset) is the backend's own. A backend whose engine lost the
episode (MuJoCo resetting its data after a bad state) calls :meth:`HalfPhysicsBase._end_episode`.
No simulator is imported here.
"""

from __future__ import annotations

import inspect
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from humanclaw_gym.body.model import BodyModel, skeleton_body
from humanclaw_gym.body.skeleton import FRAME_DIM, JOINT_NAMES, PARENTS
from humanclaw_gym.physics.contract import (
    FRAME_RATE_HZ,
    GRAVITY_M_S2,
    HUMAN_FRICTION,
    MAX_DRIVE_PER_FRAME_RAD,
    MOTOR_MAX_TORQUE_NM,
    REFERENCE_PJSC_GAINS,
    RESTITUTION,
    ROOT_ANGULAR_SUBSTEP,
    ROOT_VELOCITY_SUBSTEPS,
    SCENE_FRICTION,
    SUBSTEP_S,
    SUBSTEPS_PER_FRAME,
    check_drive_tuning,
    check_ray_down,
    validate_frame,
)
from humanclaw_gym.physics.release import zero_neck_head
from humanclaw_gym.physics.types import FrameStates
from humanclaw_gym.rotations import quat_exp, quat_log

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.backends.protocols import PhysicsCapabilities
    from humanclaw_gym.scenes.spec import SceneSpec

__all__ = [
    "BASE_OPTIONS",
    "BASE_STATE",
    "CYLINDER_Z_TO_Y",
    "IDENTITY_QUAT",
    "PARK_POSITION",
    "ROOT_GRAVITY_MODES",
    "HalfPhysicsBase",
    "PhysicsOption",
    "PhysicsSnapshot",
    "RealizedState",
    "RecordedFrames",
    "part_volume",
    "physics_options",
]

#: The reference release's root-only gravity modes (``root_gravity_mode``).
ROOT_GRAVITY_MODES: tuple[str, ...] = ("pre", "substep", "midpoint")

#: Where the humanoid waits between ``build`` and the first ``reset`` (far below any scene).
PARK_POSITION: tuple[float, float, float] = (0.0, -1000.0, 0.0)
#: xyzw rotation turning an engine cylinder (axis local +Z) into a scene cylinder (axis +Y):
#: -90 degrees about X.
CYLINDER_Z_TO_Y: tuple[float, float, float, float] = (-math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5))
#: The identity rotation, xyzw.
IDENTITY_QUAT = np.array([0.0, 0.0, 0.0, 1.0])
_JOINT_VELOCITY_DRIVE = "written before substep 0, capped like the drive"


def part_volume(shape: str, size: tuple[float, float, float]) -> float:
    """Volume of a scene part, m^3 (a mesh part: its bounding box, ``size`` = half extents;
    a cylinder: ``size = (radius, half height, _)``; a sphere: ``size[0]`` the radius). The
    backends spread a dynamic object's mass over its parts by these volumes."""
    if shape in ("box", "mesh"):
        return 8.0 * size[0] * size[1] * size[2]
    if shape == "cylinder":
        return math.pi * size[0] ** 2 * 2.0 * size[1]
    return 4.0 / 3.0 * math.pi * size[0] ** 3


def _positive(value: float, name: str) -> float:
    number = float(value)
    if not (math.isfinite(number) and number > 0.0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return number


def _torque_caps(body: BodyModel) -> list[float]:
    """Each joint's torque cap (N m per axis) by name from
    :data:`~.contract.MOTOR_MAX_TORQUE_NM`; a link the table does not name (jaw, eyes,
    fingers of an SMPL-X body) takes its nearest named ancestor's cap."""
    caps: list[float] = [0.0] * body.num_links
    for j in range(1, body.num_links):
        cap = MOTOR_MAX_TORQUE_NM.get(body.names[j])
        caps[j] = caps[body.parents[j]] if cap is None else cap
        if caps[j] <= 0.0:
            raise ValueError(
                f"body link {body.names[j]!r} has no torque cap: neither it nor an ancestor "
                f"is one of {tuple(MOTOR_MAX_TORQUE_NM)}"
            )
    return caps[1:]


@dataclass(frozen=True)
class PhysicsOption:
    """One constructor keyword of a physics backend, declared once.

    Attributes:
        name: the keyword (and the attribute the backend keeps its value in, and its key in
            ``contract()`` and ``BackendConfig.physics_options``).
        default: its value when not given.
        meaning: one line for the docs.
        check: turns a given value into the kept one, raising ``TypeError`` / ``ValueError``
            naming the option (None: kept as given). The base checks its own options
            itself.
        recorded: ``contract()`` records it under its name (forward replay rebuilds the
            backend from the recorded options).
    """

    name: str
    default: Any
    meaning: str
    check: Callable[[Any], Any] | None = None
    recorded: bool = True


#: The keywords every half-physics backend takes (its defaults may differ, see
#: :func:`physics_options`), in the order of their documentation.
BASE_OPTIONS: tuple[PhysicsOption, ...] = (
    PhysicsOption("solver_iterations", 10, "constraint-solver iterations per substep, [1, 1000]"),
    PhysicsOption(
        "root_correction_gain",
        1.0,
        "weight of the realized-to-generated correction in the root angular drive, [0, 1]",
    ),
    PhysicsOption("pjsc_gains", None, "per-link PJSC gain overrides by link name, each in [0, 1]"),
    PhysicsOption("motor_torque_scale", 1.0, "factor on every joint's torque cap, > 0"),
    PhysicsOption("body_asset", None, "a body folder in the reference release's format"),
    PhysicsOption("human_friction", HUMAN_FRICTION, "lateral friction of the humanoid, > 0"),
    PhysicsOption("root_friction", None, "lateral friction of the root link (None: human's)"),
    PhysicsOption("root_gravity_mode", None, "None or the release's root-only gravity mode"),
    PhysicsOption("root_gravity_scale", 1.0, "factor on gravity in the root-only modes, >= 0"),
    PhysicsOption(
        "inherit_downward_root_y_velocity",
        True,
        "root-only modes: carry the realized downward root velocity into the next frame",
    ),
    PhysicsOption(
        "release_arithmetic",
        False,
        "the reference release's per-frame arithmetic where it differs (physics.release)",
    ),
)
_BASE_NAMES = frozenset(o.name for o in BASE_OPTIONS)

#: The attributes :class:`HalfPhysicsBase` owns: only its own methods write them; a backend
#: reads them (``tests/test_backend_state.py`` checks that no backend module assigns one, nor
#: an option a backend declares). The shared options are kept under their names as well.
BASE_STATE: frozenset[str] = _BASE_NAMES | frozenset(
    {
        "body",  # the humanoid built, as data
        "pjsc_gains",  # per joint, checked
        "max_torque_nm",  # per joint, scale applied
        "_body_identity",  # a body asset's identity record (contract)
        "_drive_map",  # per link, the frame joint driving it
        "_scene",  # the scene built (None: not built)
        "_dynamic_ids",  # the dynamic objects' ids, the rows of object_poses
        "_episode",  # episodes started (snapshots carry it)
        "_episode_ready",  # reset ran and the engine still holds the episode
        "_real_pos",  # the realized state: root joint position ...
        "_real_rot",  # ... and link rotations, as the last engine hook returned them
    }
)


class RealizedState(NamedTuple):
    """What an engine hook returns: the humanoid's realized state as the engine read it.

    Attributes:
        pos: ``float64 (3,)``, the root joint's world position.
        rot: ``float64 (L, 4)`` xyzw rotations: row 0 the root's world rotation, rows
            ``1..`` each joint's rotation relative to its parent.
    """

    pos: np.ndarray
    rot: np.ndarray


class RecordedFrames(NamedTuple):
    """What :meth:`HalfPhysicsBase._record_engine` returns for ``k`` frames that ran.

    Attributes:
        pos: ``(k, 3)`` root positions after each frame (as :attr:`RealizedState.pos`).
        rot: ``(k, L, 4)`` link rotations after each frame.
        object_poses: ``(k, M, 7)`` dynamic object poses after each frame.
        contacts: the contact rows of each frame when asked for, else None.
        error: the exception of the frame that ended the chunk, or None.
    """

    pos: np.ndarray
    rot: np.ndarray
    object_poses: np.ndarray
    contacts: list[np.ndarray] | None
    error: Exception | None


def physics_options(*added: PhysicsOption, **defaults: Any) -> tuple[PhysicsOption, ...]:
    """A backend's keyword declaration: :data:`BASE_OPTIONS` with some defaults changed,
    then the options it adds, e.g.
    ``physics_options(PhysicsOption("target_ramp", True, "...", check=...), solver_iterations=20)``.

    Raises:
        ValueError: a default for an option the base does not have, or an added option
            whose name is taken.
    """
    unknown = sorted(set(defaults) - _BASE_NAMES)
    if unknown:
        raise ValueError(
            f"physics_options: defaults {unknown} name no shared option: allowed "
            f"{[o.name for o in BASE_OPTIONS]}"
        )
    names = [o.name for o in BASE_OPTIONS]
    for option in added:
        if not isinstance(option, PhysicsOption) or option.name in names:
            raise ValueError(f"physics_options: {option!r} is no new PhysicsOption")
        names.append(option.name)
    base = tuple(
        replace(o, default=defaults[o.name]) if o.name in defaults else o for o in BASE_OPTIONS
    )
    return base + tuple(added)


def _signature(options: tuple[PhysicsOption, ...]) -> inspect.Signature:
    """The signature of calling a backend class with a declaration: keyword-only
    parameters, one per option."""
    return inspect.Signature(
        [
            inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default)
            for o in options
        ]
    )


@dataclass(frozen=True)
class PhysicsSnapshot:
    """What every backend's :meth:`HalfPhysicsBase.get_state` snapshot holds besides its
    engine state: the backend it belongs to (``id``) and the episode it was taken in. Opaque
    to callers; valid until the next ``reset``."""

    owner: int
    episode: int


class HalfPhysicsBase(ABC):
    """Shared bookkeeping of a half-physics backend (see the module docstring).

    The constructor takes the keywords of :attr:`options` (a backend class declares them
    once, e.g. ``options = physics_options(solver_iterations=20)``; its signature is made
    from the declaration) plus ``body``; the shared ones:

    Args:
        solver_iterations: the engine's constraint-solver iterations per substep, [1, 1000].
        root_correction_gain: weight of the realized-to-generated correction in the root
            angular drive, [0, 1].
        pjsc_gains: per-link PJSC gain overrides by link name, each in [0, 1].
        motor_torque_scale: factor on every joint's torque cap
            (:data:`~.contract.MOTOR_MAX_TORQUE_NM`), > 0.
        body: the humanoid to build (default :func:`~humanclaw_gym.body.model.skeleton_body`).
            Without ``frame_joints`` its links must be the skeleton's (one link per joint of
            the 75-D frame, ``JOINT_NAMES`` order); offsets, shapes and masses are free.
        body_asset: a body folder in the reference release's format
            (:func:`humanclaw_gym.body.asset.load_body_asset`) to build instead; not
            together with ``body``.
        human_friction: lateral friction of the humanoid's links, > 0 (default
            :data:`~.contract.HUMAN_FRICTION`).
        root_friction: lateral friction of the root link (the pelvis), > 0; None: the same
            as ``human_friction``.
        root_gravity_mode: None (default): the engine's gravity acts on every humanoid link
            and the root's vertical velocity is left to gravity and contacts. ``"pre"``,
            ``"substep"`` or ``"midpoint"``: the reference release's root-only gravity: the
            humanoid's links feel no gravity; before substep 0 the root's vertical velocity
            is set to the generated one plus, with ``inherit_downward_root_y_velocity``, the
            realized downward velocity; gravity (times ``root_gravity_scale``) is added to
            the root's vertical velocity once for the whole frame before substep 0
            (``"pre"``), before every substep (``"substep"``), or half before and half after
            every substep (``"midpoint"``). Dynamic objects keep their weight either way.
        root_gravity_scale: factor on gravity in the root-only modes, >= 0.
        inherit_downward_root_y_velocity: in the root-only modes, carry the realized
            downward root velocity into the next frame's vertical command.
        release_arithmetic: False (default): this package's drive arithmetic. True: the
            reference release's where it differs (:mod:`~humanclaw_gym.physics.release`):
            the first frame of every chunk of :data:`~.contract.FRAMES_PER_CHUNK` frames
            since reset gets no translation command and neck, head and hands are zeroed in
            the physics input (here); each backend takes the rest it can (pybullet: the
            release's joint drive and root velocity, see its class). Needs
            ``root_correction_gain`` 1.0 (the release's root angular drive).

    Raises:
        TypeError / ValueError: an option out of range or unknown, or a body of other links.
        BodyAssetError: ``body_asset`` cannot be read (one line naming the file).
    """

    capabilities: ClassVar[PhysicsCapabilities]
    #: The constructor keywords (see :func:`physics_options`): checked here, kept as the
    #: attributes of their names, recorded by :meth:`contract` (the options a backend adds,
    #: after the shared ones) and read by the env's option check and forward replay.
    options: ClassVar[tuple[PhysicsOption, ...]] = BASE_OPTIONS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "options" in cls.__dict__:  # the declaration is the constructor's signature
            cls.__signature__ = _signature(cls.options)  # type: ignore[attr-defined]
        elif "__init__" in cls.__dict__:  # a constructor of its own: its own signature
            cls.__signature__ = None  # type: ignore[attr-defined]

    def __init__(self, *, body: BodyModel | None = None, **options: Any) -> None:
        declared = {o.name: o for o in type(self).options}
        unknown = sorted(set(options) - set(declared))
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword arguments {unknown}: allowed "
                f"{list(declared)}"
            )
        values = {name: options.get(name, o.default) for name, o in declared.items()}
        self._init_shared(body, **{k: v for k, v in values.items() if k in _BASE_NAMES})
        for name, option in declared.items():
            if name not in _BASE_NAMES:
                value = values[name]
                setattr(self, name, value if option.check is None else option.check(value))

    def _init_shared(
        self,
        body: BodyModel | None,
        *,
        solver_iterations: int,
        root_correction_gain: float,
        pjsc_gains: dict[str, float] | None,
        motor_torque_scale: float,
        body_asset: str | None,
        human_friction: float,
        root_friction: float | None,
        root_gravity_mode: str | None,
        root_gravity_scale: float,
        inherit_downward_root_y_velocity: bool,
        release_arithmetic: bool,
    ) -> None:
        self.human_friction = _positive(human_friction, "human_friction")
        self.root_friction = (
            None if root_friction is None else _positive(root_friction, "root_friction")
        )
        if root_gravity_mode is not None and root_gravity_mode not in ROOT_GRAVITY_MODES:
            raise ValueError(
                f"root_gravity_mode must be None or one of {ROOT_GRAVITY_MODES}, got "
                f"{root_gravity_mode!r}"
            )
        self.root_gravity_mode = root_gravity_mode
        scale = float(root_gravity_scale)
        if not (math.isfinite(scale) and scale >= 0.0):
            raise ValueError(
                f"root_gravity_scale must be finite and >= 0, got {root_gravity_scale}"
            )
        self.root_gravity_scale = scale
        if not isinstance(inherit_downward_root_y_velocity, bool):
            raise TypeError(
                "inherit_downward_root_y_velocity must be a bool, got "
                f"{inherit_downward_root_y_velocity!r}"
            )
        self.inherit_downward_root_y_velocity = inherit_downward_root_y_velocity
        if not isinstance(release_arithmetic, bool):
            raise TypeError(f"release_arithmetic must be a bool, got {release_arithmetic!r}")
        if release_arithmetic and float(root_correction_gain) != 1.0:
            raise ValueError(
                "release_arithmetic=True drives the root's rotation as the release does "
                f"(root_correction_gain 1.0); got root_correction_gain={root_correction_gain}"
            )
        self.release_arithmetic = release_arithmetic
        self.body_asset: str | None = None
        self._body_identity: dict[str, Any] | None = None
        if body_asset is not None:
            if body is not None:
                raise ValueError("give body or body_asset, not both")
            if not isinstance(body_asset, (str, os.PathLike)):
                raise TypeError(f"body_asset must be a path, got {body_asset!r}")
            from humanclaw_gym.body.asset_cache import cached_body_asset

            asset = cached_body_asset(body_asset)
            body = asset.body_model()
            self.body_asset = os.fspath(body_asset)
            self._body_identity = asset.identity()
        body = skeleton_body() if body is None else body
        pjsc = check_drive_tuning(
            solver_iterations, root_correction_gain, motor_torque_scale, pjsc_gains, body.names[1:]
        )
        if body.frame_joints is None and body.names != JOINT_NAMES:
            raise ValueError(
                f"{type(self).__name__}: body links must be the 75-D frame's joints "
                f"{JOINT_NAMES} with parents {PARENTS}; got {body.names} with {body.parents}"
            )
        self.body = body
        #: ``int64 (L,)``: per link, the frame joint driving it, -1 held at rest.
        self._drive_map = body.drive_map
        self.solver_iterations = solver_iterations
        self.root_correction_gain = float(root_correction_gain)
        self.pjsc_gains = pjsc
        self.motor_torque_scale = float(motor_torque_scale)
        #: ``float64 (L - 1,)``: each joint's torque cap per axis, N m (scale applied).
        self.max_torque_nm = np.array([cap * self.motor_torque_scale for cap in _torque_caps(body)])
        self._scene: SceneSpec | None = None
        self._episode = 0
        self._episode_ready = False
        self._dynamic_ids: tuple[int, ...] = ()
        # the realized state, as the last engine hook returned it (see _take_realized)
        self._real_pos = np.zeros(3)
        self._real_rot = np.tile(IDENTITY_QUAT, (body.num_links, 1))

    @property
    def link_root_friction(self) -> float:
        """The root link's lateral friction in use."""
        return self.human_friction if self.root_friction is None else self.root_friction

    def frame_link_rotations(self, frame: np.ndarray) -> np.ndarray:
        """``float64 (L, 4)`` xyzw rotations of every link for a 75-D frame: row 0 the root
        (body -> world), rows ``1..`` each link's rotation relative to its parent; a link
        the frame does not drive gets the identity."""
        joints = quat_exp(np.asarray(frame[3:], dtype=np.float64).reshape(-1, 3))
        out = np.tile(IDENTITY_QUAT, (self.body.num_links, 1))
        driven = self._drive_map >= 0
        out[driven] = joints[self._drive_map[driven]]
        return out

    # ================================================================== engine hooks
    @abstractmethod
    def _build_engine(self, scene: SceneSpec) -> Sequence[int]:
        """Create the engine's world: the static scene, every dynamic object at its initial
        pose and ``self.body`` parked at :data:`PARK_POSITION`. Returns the dynamic objects'
        scene ids in scene order (the rows of :meth:`object_poses`)."""

    @abstractmethod
    def _close_engine(self) -> None:
        """Release the engine's world. Idempotent; safe after a failed ``_build_engine``."""

    @abstractmethod
    def _reset_engine(self, frame: np.ndarray) -> RealizedState:
        """Objects back, the humanoid at the (checked) frame at rest, drives cleared;
        returns the realized state."""

    @abstractmethod
    def _step_engine(self, frame: np.ndarray) -> RealizedState:
        """Drives and the 4 substeps of one (checked) frame; returns the realized state.
        The realized state at the start of the frame is ``self._real_pos`` /
        ``self._real_rot``."""

    def _step_engine_frames(self, rows: list[np.ndarray]) -> RealizedState:
        """Checked frames (at least one) in order, as :meth:`_step_engine` does each;
        returns the realized state after the last. A backend may run them in one call
        (MuJoCo's compiled runner); by default each row goes through :meth:`_step_engine`
        and the base keeps each row's state (the next row's drives read it)."""
        for row in rows[:-1]:
            self._take_realized(self._step_engine(row), "_step_engine")
        return self._step_engine(rows[-1])

    def _record_engine(self, rows: list[np.ndarray], contacts: bool, parts: bool) -> RecordedFrames:
        """Checked frames in order, as :meth:`_step_engine` does each, with the state after
        every frame (see :meth:`record_frames`); a frame that raises ends the chunk and its
        exception is returned. By default frame by frame: the base keeps each frame's state,
        reads :meth:`object_poses` and, with ``contacts``, :meth:`_frame_contacts`, and
        converts the contact queries together (:meth:`_contact_batch`)."""
        pos: list[np.ndarray] = []
        rot: list[np.ndarray] = []
        poses: list[np.ndarray] = []
        queries: list[Any] = []
        error: Exception | None = None
        for frame in rows:
            try:
                self._take_realized(self._step_engine(frame), "_step_engine")
            except Exception as exc:  # the frames before it stand; the caller re-raises
                error = exc
                break
            pos.append(self._real_pos)
            rot.append(self._real_rot)
            poses.append(self.object_poses())
            if contacts:
                queries.append(self._frame_contacts(parts))
        k = len(pos)
        return RecordedFrames(
            np.array(pos).reshape(k, 3),
            np.array(rot).reshape(k, self.body.num_links, 4),
            np.array(poses).reshape(k, len(self._dynamic_ids), 7),
            self._contact_batch(queries, parts) if contacts else None,
            error,
        )

    @abstractmethod
    def _ray_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        """The engine's downward ray (checked floats, ``from_y > to_y``)."""

    @abstractmethod
    def _snapshot(self) -> PhysicsSnapshot:
        """The engine and drive state of the current episode."""

    def _snapshot_live(self, state: Any) -> bool:
        """Whether the engine still holds ``state`` (a snapshot of this episode)."""
        return True

    @abstractmethod
    def _restore(self, state: Any) -> RealizedState:
        """Restore a checked snapshot of this episode; returns the realized state."""

    @abstractmethod
    def _contract_engine(self) -> dict[str, Any]:
        """The engine's own contract entries (its mechanics and their constants)."""

    @abstractmethod
    def link_poses(self) -> np.ndarray:
        """World pose ``[x, y, z, qx, qy, qz, qw]`` of every link frame (= joint frame),
        rows in ``body.names`` order, ``float64 (L, 7)``."""

    @abstractmethod
    def object_poses(self) -> np.ndarray:
        """World pose of every dynamic object's frame (not its centre of mass), ``(M, 7)``."""

    @abstractmethod
    def contacts(self, parts: bool = True) -> np.ndarray:
        """Contact points of the current state (``CONTACT_DTYPE`` rows), computed on call;
        the objects' part indices only with ``parts`` (else -1)."""

    def _frame_contacts(self, parts: bool) -> Any:
        """The contact query of the current state inside :meth:`record_frames`, in a form
        :meth:`_contact_batch` turns into rows (default: the rows themselves)."""
        return self.contacts(parts)

    def _contact_batch(self, queries: list[Any], parts: bool) -> list[np.ndarray]:
        """The ``CONTACT_DTYPE`` rows of each of a chunk's :meth:`_frame_contacts` results
        (a backend may convert them all at once; default: they are rows already)."""
        return list(queries)

    # ================================================================== the base's state
    def _take_realized(self, state: Any, hook: str) -> None:
        """Keep a copy of the realized state an engine hook returned (the base's
        ``_real_pos`` / ``_real_rot``; a backend's own buffers are never shared).

        Raises:
            TypeError / ValueError: the hook returned something else (a backend's bug),
                naming the hook.
        """
        try:
            pos, rot = state
        except (TypeError, ValueError):
            raise TypeError(
                f"{type(self).__name__}.{hook} returned {type(state).__name__}: an engine hook "
                "returns the realized state, RealizedState(pos (3,), rot (L, 4))"
            ) from None
        pos = np.array(pos, dtype=np.float64)
        rot = np.array(rot, dtype=np.float64)
        if pos.shape != (3,) or rot.shape != (self.body.num_links, 4):
            raise ValueError(
                f"{type(self).__name__}.{hook} returned a realized state of shapes {pos.shape} "
                f"and {rot.shape}: allowed (3,) and ({self.body.num_links}, 4)"
            )
        self._real_pos, self._real_rot = pos, rot

    def _end_episode(self) -> None:
        """For a backend whose engine no longer holds the episode (e.g. MuJoCo reset its
        data after a bad state): stepping and the readouts are refused ("call reset")
        until the next :meth:`reset` (or :meth:`set_state`)."""
        self._episode_ready = False

    def _is_built(self) -> bool:
        """Whether :meth:`build` succeeded and :meth:`close` did not run since."""
        return self._scene is not None

    # ================================================================== guards
    def _require_built(self, where: str) -> None:
        if not self._is_built():
            raise RuntimeError(f"{type(self).__name__}.{where}: call build(scene) first")

    def _require_episode(self, where: str) -> None:
        self._require_built(where)
        if not self._episode_ready:
            raise RuntimeError(f"{type(self).__name__}.{where}: call reset(frame_75) first")

    # ================================================================== contract
    def contract(self) -> dict[str, Any]:
        """The frame contract, the engine's mechanics and this instance's tuning, JSON-ready
        (for replay manifests); constructor options under their own names."""
        names = self.body.names[1:]
        out: dict[str, Any] = {
            "backend": self.capabilities.name,
            "frame_rate_hz": FRAME_RATE_HZ,
            "substeps_per_frame": SUBSTEPS_PER_FRAME,
            "substep_s": SUBSTEP_S,
            "root_velocity_substeps": list(ROOT_VELOCITY_SUBSTEPS),
            "root_angular_substep": ROOT_ANGULAR_SUBSTEP,
            "gravity_m_s2": GRAVITY_M_S2,
            "max_drive_per_frame_rad": MAX_DRIVE_PER_FRAME_RAD,
            "human_friction": self.human_friction,
            "root_friction": self.root_friction,
            "root_gravity_mode": self.root_gravity_mode,
            "root_gravity_scale": self.root_gravity_scale,
            "inherit_downward_root_y_velocity": self.inherit_downward_root_y_velocity,
            "release_arithmetic": self.release_arithmetic,
            "scene_friction": SCENE_FRICTION,
            "restitution": RESTITUTION,
            "joint_velocity_drive": _JOINT_VELOCITY_DRIVE,
        }
        out.update(self._contract_engine())
        out["solver_iterations"] = self.solver_iterations
        out["root_correction_gain"] = self.root_correction_gain
        out["pjsc_gains"] = {name: float(g) for name, g in zip(names, self.pjsc_gains, strict=True)}
        out["reference_pjsc_gains"] = dict(REFERENCE_PJSC_GAINS)
        out["motor_torque_scale"] = self.motor_torque_scale
        out["motor_max_torque_nm"] = {
            name: float(f) for name, f in zip(names, self.max_torque_nm, strict=True)
        }
        out["body_asset"] = self.body_asset
        if self._body_identity is not None:
            out["body"] = dict(self._body_identity)
        for option in type(self).options:  # those a backend adds
            if option.recorded and option.name not in _BASE_NAMES:
                out[option.name] = getattr(self, option.name)
        return out

    # ================================================================== lifecycle
    def build(self, scene: SceneSpec) -> None:
        """Create the engine's world: the static scene, every dynamic object at its initial
        pose and the body parked at :data:`PARK_POSITION`.

        Raises:
            RuntimeError: already built (call :meth:`close` first).
            Exception: whatever the engine raised building it (the backend is then closed),
                e.g. ``ValueError`` for a part shape it cannot collide.
        """
        if self._is_built():
            raise RuntimeError(f"{type(self).__name__}.build: already built; call close() first")
        self._episode_ready = False
        try:
            ids = tuple(int(i) for i in self._build_engine(scene))
        except BaseException:
            self.close()
            raise
        self._dynamic_ids = ids
        self._scene = scene

    def close(self) -> None:
        """Release the engine's world. Idempotent; safe after a failed :meth:`build`."""
        self._episode_ready = False
        self._scene = None
        self._close_engine()

    # ================================================================== episode
    def reset(self, frame_75: np.ndarray) -> None:
        """Start an episode: dynamic objects back at their scene poses, the humanoid placed
        exactly at ``frame_75`` at rest, the drives cleared.

        Raises:
            ValueError: ``frame_75`` is not a finite ``(75,)`` vector.
            RuntimeError: called before ``build``.
        """
        self._require_built("reset")
        frame = self._physics_input(validate_frame(frame_75, "reset"))
        self._episode_ready = False
        self._episode += 1
        self._take_realized(self._reset_engine(frame), "_reset_engine")
        self._episode_ready = True

    def step_frame(self, frame_75: np.ndarray) -> None:
        """Execute one generated 30 Hz frame: drives, then 4 substeps of 1/120 s.

        Raises:
            ValueError: ``frame_75`` is not a finite ``(75,)`` vector.
            RuntimeError: called before :meth:`reset`, or the simulation diverged.
        """
        self._require_episode("step_frame")
        frame = self._physics_input(validate_frame(frame_75, "step_frame"))
        self._take_realized(self._step_engine(frame), "_step_engine")

    def step_frames(self, frames: np.ndarray) -> None:
        """Execute generated frames in order; the same as :meth:`step_frame` on each row,
        bit for bit. A backend may run them in one call (MuJoCo: one compiled call that
        does not hold the GIL, so other Python threads run meanwhile).

        Args:
            frames: ``float64 (n, 75)`` generated frames, finite.

        Raises:
            ValueError: ``frames`` is not a finite ``(n, 75)`` array (checked before any
                frame runs).
            RuntimeError: called before :meth:`reset`, or the simulation diverged (the
                frames after the diverged one do not run).
        """
        self._require_episode("step_frames")
        rows = self._checked_input(frames, "step_frames")
        if rows:
            self._take_realized(self._step_engine_frames(rows), "_step_engine_frames")

    def record_frames(
        self, frames: np.ndarray, *, contacts: bool = False, contact_parts: bool = False
    ) -> FrameStates:
        """Execute generated frames in order, as :meth:`step_frame` does each, and read the
        state after every frame: the realized pose, the dynamic objects' poses and, with
        ``contacts``, the contact rows (the objects' part indices with ``contact_parts``).
        Each is what the readout of the same name returns after that frame, bit for bit; a
        backend may read them more cheaply than frame by frame (MuJoCo runs the chunk in
        one compiled call).

        Args:
            frames: ``float64 (n, 75)`` generated frames, finite (all checked first).

        Returns:
            :class:`~humanclaw_gym.physics.types.FrameStates` of the frames that ran; a
            frame that raised (e.g. the simulation diverged) ends the chunk and its exception
            is returned in ``error``, after the states of the frames before it.

        Raises:
            ValueError: ``frames`` is not a finite ``(n, 75)`` array (nothing ran).
            RuntimeError: called before :meth:`reset`.
        """
        self._require_episode("record_frames")
        rows = self._checked_input(frames, "record_frames")
        recorded = self._record_engine(rows, contacts, contact_parts)
        if len(recorded.pos):
            last = RealizedState(recorded.pos[-1], recorded.rot[-1])
            self._take_realized(last, "_record_engine")
        return self._frame_states(
            recorded.pos, recorded.rot, recorded.object_poses, recorded.contacts, recorded.error
        )

    def _physics_input(self, frame: np.ndarray) -> np.ndarray:
        """What the engine is driven with for a checked frame: the frame itself, or with
        ``release_arithmetic`` a copy with neck and head zeroed (the release's input)."""
        return zero_neck_head(frame) if self.release_arithmetic else frame

    def _checked_input(self, frames: np.ndarray, where: str) -> list[np.ndarray]:
        """Every row of ``frames (n, 75)`` checked, as :meth:`_physics_input` makes it."""
        return [self._physics_input(row) for row in self._check_frames(frames, where)]

    @staticmethod
    def _check_frames(frames: np.ndarray, where: str) -> list[np.ndarray]:
        """Every row of ``frames (n, 75)`` checked (:func:`~.contract.validate_frame`)."""
        arr = np.asarray(frames)
        if arr.ndim != 2:
            raise ValueError(
                f"{where}: frames has shape {arr.shape}: allowed (n, {FRAME_DIM}), finite"
            )
        return [validate_frame(row, f"{where}[{i}]") for i, row in enumerate(arr)]

    def _frame_states(
        self,
        pos: np.ndarray,
        rot: np.ndarray,
        object_poses: np.ndarray,
        contacts: list[np.ndarray] | None,
        error: Exception | None,
    ) -> FrameStates:
        """:class:`FrameStates` of recorded root positions ``(k, 3)``, link rotations
        ``(k, L, 4)`` (as ``_real_pos`` / ``_real_rot``) and object poses ``(k, M, 7)``;
        every array read-only."""
        realized = self._realized_frames(pos, rot)
        for array in (realized, object_poses, *(contacts or ())):
            array.setflags(write=False)
        return FrameStates(
            realized=realized,
            object_poses=object_poses,
            contacts=None if contacts is None else tuple(contacts),
            error=error,
        )

    # ================================================================== readouts
    def realized_frame(self) -> np.ndarray:
        """The humanoid's realized pose as a 75-D frame (root position, root axis-angle and
        each joint's local axis-angle, angles in ``[0, pi]``), ``float64 (75,)``. A frame
        joint the body does not have (the release's bodies lack the two hand joints) reads
        zero."""
        self._require_episode("realized_frame")
        return self._realized_frames(self._real_pos[None], self._real_rot[None])[0]

    def _realized_frames(self, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
        """``float64 (k, 75)`` realized frames of ``k`` realized states: root positions
        ``(k, 3)`` and link rotations ``(k, L, 4)`` (elementwise, so one state gives the same
        bits alone or among others)."""
        k = len(pos)
        out = np.zeros((k, FRAME_DIM))
        out[:, 0:3] = pos
        logs = quat_log(rot)
        driven = self._drive_map >= 0
        rows = np.zeros((k, FRAME_DIM // 3 - 1, 3))
        rows[:, self._drive_map[driven]] = logs[:, driven]
        out[:, 3:] = rows.reshape(k, FRAME_DIM - 3)
        return out

    def link_origins(self) -> np.ndarray:
        """Row 0: the articulated root; rows ``1..L``: every link origin in ``body.names``
        order (row 1, the root link's origin, is the same point as row 0 in this model).
        ``float64 (L + 1, 3)``: the point set of the final-distance metric."""
        poses = self.link_poses()
        return np.concatenate([self._real_pos[None, :], poses[:, 0:3]], axis=0)

    @property
    def dynamic_object_ids(self) -> tuple[int, ...]:
        """Scene ids of the dynamic objects (scene order), the rows of ``object_poses``."""
        return self._dynamic_ids

    def ray_cast_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        """Height of the first scene surface hit by a vertical ray at ``(x, z)`` from
        ``from_y`` down to ``to_y`` (the humanoid is not seen), or None.

        Raises:
            ValueError: a non-finite argument, or ``from_y <= to_y``.
        """
        self._require_built("ray_cast_down")
        return self._ray_down(*check_ray_down(x, z, from_y, to_y))

    # ================================================================== snapshots
    def get_state(self) -> object:
        """Snapshot of the whole simulation and of the drive state, valid until the next
        :meth:`reset`; restoring it and stepping the same frames reproduces them exactly."""
        self._require_episode("get_state")
        return self._snapshot()

    def set_state(self, state: object) -> None:
        """Restore a snapshot taken by :meth:`get_state` in the current episode.

        Raises:
            ValueError: not a snapshot of this backend, or taken before the last reset.
        """
        self._require_built("set_state")
        if not isinstance(state, PhysicsSnapshot) or state.owner != id(self):
            raise ValueError("set_state: state must be a snapshot from this backend's get_state()")
        if state.episode != self._episode or not self._snapshot_live(state):
            raise ValueError(
                f"set_state: the snapshot is from episode {state.episode}, the current episode is "
                f"{self._episode}; snapshots are valid until the next reset()"
            )
        self._take_realized(self._restore(state), "_restore")
        self._episode_ready = True
