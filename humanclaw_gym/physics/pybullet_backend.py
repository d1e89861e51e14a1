"""pybullet implementation of the half-physics frame contract.

``docs/physics.md`` explains every clause; the comments below name the clause each piece of
code implements. One generated 30 Hz frame (:meth:`PybulletHalfPhysics.step_frame`):

1. Drives are computed from the previous generated frame, the new generated frame and the
   realized state: root x/z velocity, root angular velocity and one spherical-motor target
   per joint, each rotation taken along the shortest arc and capped at 30 degrees per frame.
   Every joint's velocity is set, once before substep 0, to the rate that reaches its motor
   target in one frame (the joint velocity drive); the motors then hold that target.
2. Four Bullet substeps of 1/120 s. The root x/z velocity is written before substeps 0 and 2,
   the root angular velocity before substep 0 only; gravity and contacts act on every
   substep (vertical root motion is never written).
3. The realized state is read back once and returned to the base, which keeps it for the
   readout methods and the next frame's drives.

The bookkeeping around these calls (argument checks, lifecycle, readouts of the realized
state, the contract record) is :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`'s, and
the humanoid is built from its ``body`` (a URDF written from it). The drive state (the
previous generated frame and its rotations, the PJSC commands, the frames since reset) is
this backend's own. The simulation world is Y-up (gravity ``(0, -9.8, 0)``), like every other module, so no axis
conversion happens anywhere. pybullet is imported only inside :meth:`build`.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.backends.protocols import PhysicsCapabilities
from humanclaw_gym.body.skeleton import FRAME_DIM
from humanclaw_gym.physics.base import (
    CYLINDER_Z_TO_Y,
    IDENTITY_QUAT,
    PARK_POSITION,
    HalfPhysicsBase,
    PhysicsSnapshot,
    RealizedState,
    part_volume,
    physics_options,
)
from humanclaw_gym.physics.contract import (
    FRAME_RATE_HZ,
    GRAVITY_M_S2,
    HUMAN_FRICTION,
    MAX_DRIVE_PER_FRAME_RAD,
    PJSC_GAINS,
    REFERENCE_PJSC_GAINS,
    RESTITUTION,
    ROOT_ANGULAR_SUBSTEP,
    ROOT_VELOCITY_SUBSTEPS,
    SCENE_FRICTION,
    SUBSTEP_S,
    SUBSTEPS_PER_FRAME,
)
from humanclaw_gym.physics.release import RELEASE_MOTOR_FORCE, first_in_chunk, joint_drive
from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID, empty_contacts
from humanclaw_gym.rotations import (
    cap_rotvec,
    quat_conj,
    quat_exp,
    quat_log,
    quat_mul,
    quat_rotate,
)

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.scenes.spec import SceneObject, SceneSpec

__all__ = [
    "COLLISION_MARGIN_M",
    "FRAME_RATE_HZ",
    "GRAVITY_M_S2",
    "HUMAN_FRICTION",
    "MAX_DRIVE_PER_FRAME_RAD",
    "PJSC_GAINS",
    "REFERENCE_PJSC_GAINS",
    "RESTITUTION",
    "ROOT_ANGULAR_SUBSTEP",
    "ROOT_VELOCITY_SUBSTEPS",
    "SCENE_FRICTION",
    "SUBSTEPS_PER_FRAME",
    "SUBSTEP_S",
    "PybulletHalfPhysics",
]

# ---------------------------------------------------------------------------------------
# The frame contract: shared by the backends (humanclaw_gym.physics.contract), re-exported
# here; the collision margin is this backend's.
# ---------------------------------------------------------------------------------------
#: Collision margin set on every created body, metres.
COLLISION_MARGIN_M = 0.01
# Collision filter group of the humanoid's links; rays cast with a mask that lacks this bit
# ignore the humanoid. Bullet's own groups are 1 (dynamic bodies) and 2 (static bodies).
_HUMAN_FILTER_GROUP = 1 << 5
_ALL_FILTER = -1
_RAY_MASK = _ALL_FILTER & ~_HUMAN_FILTER_GROUP
# Triangles per concave mesh shape (pybullet refuses shapes of about 180k triangles).
_MESH_CHUNK_FACES = 60000

# Spherical position motors. pybullet's spherical motor turns the rotation error into a
# velocity target ``position_gain * erp * error / dt`` with Bullet's non-contact erp (its
# velocity gain is ignored). Measured: tracking is best for gains 5-8, the body becomes
# unstable from about 12; 5 keeps a margin. Maximum torques (N m per axis) are those of a
# strong adult; legs and spine carry the body (vertical root motion is gravity/contact
# driven, so the legs must hold the pelvis up).
_MOTOR_POSITION_GAIN = 5.0
# Fraction of a contact penetration Bullet removes per substep. Measured: a body driven into
# a wall at 1.2 m/s sinks 5.2 cm with pybullet's default and 2.4 cm with 0.4; the motors use
# the separate non-contact erp.
_CONTACT_ERP = 0.4


@dataclass(frozen=True)
class _Snapshot(PhysicsSnapshot):
    """Opaque snapshot of :meth:`PybulletHalfPhysics.get_state` (valid until the next reset)."""

    state_id: int
    prev_gen: np.ndarray
    prev_rot: np.ndarray
    command: np.ndarray
    stepped: bool
    frame_index: int


def _release_state(backend_ref: weakref.ReferenceType, episode: int, state_id: int) -> None:
    backend = backend_ref()
    if backend is not None:
        backend._forget_saved_state(episode, state_id)


class PybulletHalfPhysics(HalfPhysicsBase):
    """Half-physics execution of generated humanoid motion in pybullet (``p.DIRECT``).

    Each instance owns its own pybullet client (every call passes ``physicsClientId``), so
    several backends can live in one process.

    Determinism: :meth:`reset` rebuilds the whole world (``resetSimulation`` and the same
    creation sequence as :meth:`build`) and then places the humanoid, so an episode's
    trajectory is bit-identical whatever ran before it. Snapshots from :meth:`get_state`
    restore exactly (pybullet ``saveState``/``restoreState``, contacts included) and stay
    valid until the next :meth:`reset` or :meth:`close`.

    Args:
        solver_iterations: Bullet constraint-solver iterations per substep. Time grows with
            it (see ``docs/physics.md``); 10 keeps standing height and tracking tight.
        root_correction_gain: weight of the realized-to-generated correction in the root
            angular drive (the same blend as PJSC). 1.0 (default) makes the root orientation
            track the generated one, so contact-induced tilt is undone at up to 30 degrees
            per frame; 0.0 replays only the generated per-frame rotation delta.
        pjsc_gains: per-joint PJSC gain overrides by joint name, each in ``[0, 1]``
            (default :data:`PJSC_GAINS`: 1.0 for every joint; the reference contract's
            values are :data:`REFERENCE_PJSC_GAINS`).
        motor_torque_scale: multiplies every joint motor's maximum torque (> 0).
        body_asset, human_friction, root_friction, root_gravity_mode, root_gravity_scale,
            inherit_downward_root_y_velocity, release_arithmetic: the body to build and the
            reference release's physics profile options, see
            :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`. A body asset's URDF is
            loaded by pybullet itself. With ``release_arithmetic`` the joints are driven as
            the release drives them (:func:`humanclaw_gym.physics.release.joint_drive`): the
            capped joint velocity written before substep 0, and before every substep each
            joint's spherical motor aimed at the release's expected rotation with the PJSC
            gain as its position gain, no velocity gain and an unbounded force (a gain of 0:
            no motor), in place of this backend's PJSC command and gain-5 motors.
    """

    capabilities = PhysicsCapabilities(
        name="pybullet", part_shapes=frozenset({"box", "cylinder", "sphere", "mesh"})
    )
    options = physics_options(solver_iterations=10)  # the shared keywords (see the base)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        num_joints = self.body.num_links - 1
        self._pjsc_col = self.pjsc_gains[:, None]
        self._links = list(range(num_joints))  # pybullet link i = body link i + 1
        # Joints the frame drives get motors and the velocity drive; the others (jaw, eyes,
        # fingers of a body asset) are held at rest: their joints are fixed in the URDF
        # pybullet loads (pybullet's joint-state and motor calls reach only the first 128
        # position coordinates of a body, fewer than 54 ball joints need).
        self._drive_idx = np.flatnonzero(self._drive_map[1:] >= 0)
        self._drive_links = self._drive_idx.tolist()
        self._drive_zero_vel = [[0.0, 0.0, 0.0]] * len(self._drive_links)
        self._motor_forces = [[float(cap)] * 3 for cap in self.max_torque_nm[self._drive_idx]]
        self._motor_gains = [_MOTOR_POSITION_GAIN] * len(self._drive_links)
        # the release's motors (release_arithmetic): the PJSC gain as the position gain, no
        # velocity gain, unbounded force; a joint of gain 0 has no motor (zero force)
        release_gains = self.pjsc_gains[self._drive_idx]
        self._release_gains = [float(g) for g in release_gains]
        self._release_velocity_gains = [0.0] * len(self._drive_links)
        self._release_forces = [
            [RELEASE_MOTOR_FORCE if g > 0.0 else 0.0] * 3 for g in release_gains
        ]
        # the motor targets of the current frame's substeps (release_arithmetic)
        self._release_targets = np.zeros((SUBSTEPS_PER_FRAME, len(self._drive_links), 4))

        self._p: Any = None
        self._client: int | None = None
        self._tmpdir: Path | None = None
        self._urdf_path: Path | None = None
        self._pristine = False  # world exactly as populated, nothing placed or stepped
        self._stepped = False  # a substep ran since the humanoid was placed (manifolds exist)
        self._saved_states: set[int] = set()
        # world bookkeeping (filled by _populate)
        self._human = -1
        self._body_to_object: dict[int, int] = {}
        self._object_bodies: dict[int, int] = {}
        self._objects: dict[int, SceneObject] = {}
        self._parts: _PartIndex | None = None  # the nearest-part query, made on first use
        # per body uid: its object id (-1: none) and whether it is movable, made on first use
        self._bodies: tuple[np.ndarray, np.ndarray] | None = None
        self._dynamic_bodies: list[int] = []
        self._dynamic_com_local = np.zeros((0, 3))
        self._dynamic_weight = np.zeros(0)  # m * g of each dynamic body (root gravity modes)
        self._dynamic_body_set: frozenset[int] = frozenset()
        self._base_com_local = np.zeros(3)
        self._link_to_joint = np.arange(1, num_joints + 1)
        # the drive state: the previous generated frame (the root's x/z velocity) and its
        # link rotations, the joints' PJSC commands, the frames executed since reset (the
        # release's first-frame rule counts chunks by it)
        self._prev_gen = np.zeros(FRAME_DIM)
        self._prev_gen_rot = np.tile(IDENTITY_QUAT, (num_joints + 1, 1))
        self._pjsc_command = np.tile(IDENTITY_QUAT, (num_joints, 1))
        self._frames_since_reset = 0

    def _contract_engine(self) -> dict[str, Any]:
        return {
            "collision_margin_m": COLLISION_MARGIN_M,
            "motor_position_gain": _MOTOR_POSITION_GAIN,
            "contact_erp": _CONTACT_ERP,
        }

    # ================================================================== lifecycle
    def _build_engine(self, scene: SceneSpec) -> tuple[int, ...]:
        """Connect a private ``DIRECT`` client and create the scene and the humanoid.

        Raises:
            RuntimeError: pybullet refused a body (the base then closes the backend).
        """
        import pybullet

        from humanclaw_gym.body.urdf import build_humanoid_urdf

        self._p = pybullet
        client = int(pybullet.connect(pybullet.DIRECT))
        if client < 0:
            raise RuntimeError("pybullet.connect(DIRECT) failed")
        self._client = client
        self._tmpdir = Path(tempfile.mkdtemp(prefix="humanclaw_pybullet_"))
        if self.body.source_urdf is not None:  # a body asset: pybullet reads its URDF
            from humanclaw_gym.body.urdf import held_links_fixed_urdf_text
            from humanclaw_gym.fileio import write_text_atomic

            held = {n for n, k in zip(self.body.names, self._drive_map, strict=True) if k < 0}
            self._urdf_path = write_text_atomic(
                self._tmpdir / Path(self.body.source_urdf).name,
                held_links_fixed_urdf_text(self.body.source_urdf, held),
            )
        else:
            self._urdf_path = build_humanoid_urdf(self._tmpdir, self.body)
        return self._populate(scene)

    def _close_engine(self) -> None:
        """Disconnect and delete temporary files. Idempotent; safe after a failed build."""
        client, self._client = self._client, None
        if client is not None and self._p is not None:
            try:
                self._p.disconnect(physicsClientId=client)
            except Exception:  # noqa: BLE001 - the server may already be gone
                pass
        self._saved_states.clear()
        self._pristine = False
        self._human = -1
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            self._urdf_path = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ================================================================== world creation
    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``pybullet.<name>`` on this backend's client."""
        return getattr(self._p, name)(*args, physicsClientId=self._client, **kwargs)

    def _populate(self, scene: SceneSpec) -> tuple[int, ...]:
        """Create the world from scratch (same call sequence every time: determinism);
        returns the dynamic objects' ids."""
        # Y-up world: gravity along -Y; it acts on the humanoid and on every dynamic object
        # on every substep (contract: "movable objects get mass * gravity before every
        # substep" -- Bullet applies exactly m * g to each awake body before each internal
        # step, and dynamic objects are never allowed to sleep, see _create_objects).
        # With the reference release's root-only gravity the world has none: dynamic objects
        # get their weight as a force before every substep (_apply_object_weights), the
        # humanoid's links none, its root a vertical velocity bias (_step_engine).
        gravity = 0.0 if self.root_gravity_mode is not None else -GRAVITY_M_S2
        self._call("setGravity", 0.0, gravity, 0.0)
        # Contract: one substep = 1/120 s, stepped manually (4 per generated frame).
        self._call(
            "setPhysicsEngineParameter",
            fixedTimeStep=SUBSTEP_S,
            numSubSteps=1,
            numSolverIterations=self.solver_iterations,
            deterministicOverlappingPairs=1,
            contactERP=_CONTACT_ERP,
        )
        dynamic_ids = self._create_objects(scene)
        self._create_humanoid()
        self._pristine = True
        return dynamic_ids

    def _create_objects(self, scene: SceneSpec) -> tuple[int, ...]:
        """Every object of the scene; returns the dynamic objects' ids (scene order)."""
        p = self._p
        self._body_to_object = {}
        self._object_bodies = {}
        self._objects = {}
        self._parts = None
        self._bodies = None
        dyn_ids: list[int] = []
        dyn_bodies: list[int] = []
        dyn_com: list[np.ndarray] = []
        for obj in scene.objects:
            unsupported = [
                part.shape for part in obj.parts if part.shape not in self.capabilities.part_shapes
            ]
            if unsupported:
                raise ValueError(
                    f"object {obj.name!r}: part shapes {unsupported} are not supported"
                )
            # Dynamic objects get their centre of mass at the volume-weighted centroid of
            # their parts; pybullet's base frame is the inertial frame, so shapes are shifted.
            com_local = _parts_centroid(obj) if obj.dynamic else np.zeros(3)
            if any(part.shape == "mesh" for part in obj.parts):
                body = self._create_mesh_object(obj, com_local)
                if obj.dynamic:
                    dyn_ids.append(obj.object_id)
                    dyn_bodies.append(body)
                    dyn_com.append(com_local)
                self._object_bodies[obj.object_id] = body
                self._objects[obj.object_id] = obj
                continue
            types, radii, halves, lengths, positions, orientations = [], [], [], [], [], []
            for part in obj.parts:
                if part.shape == "box":
                    types.append(p.GEOM_BOX)
                    radii.append(0.0)
                    halves.append(list(part.size))
                    lengths.append(0.0)
                    orientations.append([0.0, 0.0, 0.0, 1.0])
                elif part.shape == "cylinder":
                    types.append(p.GEOM_CYLINDER)
                    radii.append(part.size[0])
                    halves.append([0.0, 0.0, 0.0])
                    lengths.append(2.0 * part.size[1])
                    orientations.append(list(CYLINDER_Z_TO_Y))
                else:
                    types.append(p.GEOM_SPHERE)
                    radii.append(part.size[0])
                    halves.append([0.0, 0.0, 0.0])
                    lengths.append(0.0)
                    orientations.append([0.0, 0.0, 0.0, 1.0])
                positions.append((np.asarray(part.offset) - com_local).tolist())
            shape = self._call(
                "createCollisionShapeArray",
                shapeTypes=types,
                radii=radii,
                halfExtents=halves,
                lengths=lengths,
                collisionFramePositions=positions,
                collisionFrameOrientations=orientations,
            )
            if shape < 0:
                raise RuntimeError(f"pybullet refused the collision shape of object {obj.name!r}")
            com_world = np.asarray(obj.position) + obj.rotation() @ com_local
            body = self._call(
                "createMultiBody",
                baseMass=float(obj.mass_kg) if obj.dynamic else 0.0,
                baseCollisionShapeIndex=shape,
                baseVisualShapeIndex=-1,  # the renderer is separate: no visual shapes here
                basePosition=com_world.tolist(),
                baseOrientation=list(obj.quat_xyzw()),
            )
            if body < 0:
                raise RuntimeError(f"pybullet refused the body of object {obj.name!r}")
            # One property per call: pybullet's changeDynamics silently skips some later
            # properties when an earlier one (e.g. collisionMargin) is handled first.
            self._call("changeDynamics", body, -1, lateralFriction=SCENE_FRICTION)
            self._call("changeDynamics", body, -1, restitution=RESTITUTION)
            self._call("changeDynamics", body, -1, collisionMargin=COLLISION_MARGIN_M)
            if obj.dynamic:
                # Never sleep: a sleeping body would skip gravity (e.g. a cup left hovering
                # after the object under it was pushed away).
                self._call(
                    "changeDynamics", body, -1, activationState=p.ACTIVATION_STATE_DISABLE_SLEEPING
                )
                dyn_ids.append(obj.object_id)
                dyn_bodies.append(body)
                dyn_com.append(com_local)
            self._body_to_object[body] = obj.object_id
            self._object_bodies[obj.object_id] = body
            self._objects[obj.object_id] = obj
        self._dynamic_bodies = dyn_bodies
        self._dynamic_body_set = frozenset(dyn_bodies)
        self._dynamic_com_local = np.array(dyn_com, dtype=np.float64).reshape(-1, 3)
        weights = {obj.object_id: float(obj.mass_kg) * GRAVITY_M_S2 for obj in scene.objects}
        self._dynamic_weight = np.array([weights[i] for i in dyn_ids], dtype=np.float64)
        return tuple(dyn_ids)

    def _create_mesh_object(self, obj: SceneObject, com_local: np.ndarray) -> int:
        """Bodies of an object made of mesh parts; returns its (first) body.

        Static objects: every part's collision mesh as a concave triangle mesh (Bullet BVH),
        split into static bodies of at most ``_MESH_CHUNK_FACES`` triangles (pybullet's
        per-shape limit), all mapped to the object. Dynamic objects: exactly one mesh part,
        collided as the convex hull of its collision mesh, with the object's mass. Vertices
        are placed in the object frame (scale, rotation and origin of the part's MeshRef).
        """
        from humanclaw_gym.scenes.meshes import load_part_mesh, place_vertices

        if obj.dynamic and (len(obj.parts) != 1 or obj.parts[0].shape != "mesh"):
            raise ValueError(
                f"object {obj.name!r}: a dynamic object with a mesh must have exactly one "
                "part (the mesh)"
            )
        if not obj.dynamic and any(part.shape != "mesh" for part in obj.parts):
            raise ValueError(
                f"object {obj.name!r}: mixing mesh and primitive parts is not supported"
            )
        bodies: list[int] = []
        for part in obj.parts:
            ref = part.mesh
            assert ref is not None
            asset = load_part_mesh(ref, collision=True)
            vertices, faces = asset.triangles()
            local = place_vertices(vertices, ref)
            if obj.dynamic:
                from scipy.spatial import ConvexHull

                try:
                    hull = local[ConvexHull(local).vertices]
                except Exception as exc:  # noqa: BLE001 - qhull: flat or degenerate
                    raise ValueError(
                        f"object {obj.name!r}: the convex hull of {ref.collision_asset or ref.asset} "
                        f"cannot be built ({exc})"
                    ) from None
                shape = self._call(
                    "createCollisionShape",
                    self._p.GEOM_MESH,
                    vertices=(hull - com_local).tolist(),
                )
                chunks = [shape]
            else:
                # lists, not numpy arrays: pybullet reads lists faster (measured, 20k
                # triangles: 54 ms with the conversion vs 73 ms for arrays, median of 10)
                pieces = [(local, faces)]
                if len(faces) > _MESH_CHUNK_FACES:
                    pieces = []
                    for start in range(0, len(faces), _MESH_CHUNK_FACES):
                        used, remap = np.unique(
                            faces[start : start + _MESH_CHUNK_FACES], return_inverse=True
                        )
                        pieces.append((local[used], remap.reshape(-1, 3)))
                chunks = [
                    self._call(
                        "createCollisionShape",
                        self._p.GEOM_MESH,
                        vertices=np.asarray(v, dtype=np.float64).tolist(),
                        indices=np.asarray(f, dtype=np.int64).ravel().tolist(),
                    )
                    for v, f in pieces
                ]
            if any(c < 0 for c in chunks):
                raise RuntimeError(f"pybullet refused the mesh collision shape of {obj.name!r}")
            com_world = np.asarray(obj.position) + obj.rotation() @ com_local
            for shape in chunks:
                body = self._call(
                    "createMultiBody",
                    baseMass=float(obj.mass_kg) if obj.dynamic else 0.0,
                    baseCollisionShapeIndex=shape,
                    baseVisualShapeIndex=-1,
                    basePosition=com_world.tolist(),
                    baseOrientation=list(obj.quat_xyzw()),
                )
                if body < 0:
                    raise RuntimeError(f"pybullet refused the body of object {obj.name!r}")
                self._call("changeDynamics", body, -1, lateralFriction=SCENE_FRICTION)
                self._call("changeDynamics", body, -1, restitution=RESTITUTION)
                self._call("changeDynamics", body, -1, collisionMargin=COLLISION_MARGIN_M)
                if obj.dynamic:
                    self._call(
                        "changeDynamics",
                        body,
                        -1,
                        activationState=self._p.ACTIVATION_STATE_DISABLE_SLEEPING,
                    )
                self._body_to_object[body] = obj.object_id
                bodies.append(body)
        return bodies[0]

    def _create_humanoid(self) -> None:
        p = self._p
        human = self._call(
            "loadURDF",
            str(self._urdf_path),
            basePosition=list(PARK_POSITION),
            flags=p.URDF_USE_INERTIA_FROM_FILE
            | p.URDF_MAINTAIN_LINK_ORDER
            | p.URDF_IGNORE_VISUAL_SHAPES,
        )
        if human < 0:
            raise RuntimeError(
                f"pybullet could not load the humanoid URDF {str(self._urdf_path)!r}"
            )
        self._human = human
        n = self._call("getNumJoints", human)
        if n != len(self._links):
            raise RuntimeError(f"humanoid URDF has {n} joints, expected {len(self._links)}")
        # Explicit map pybullet link index -> body link index (link i is the child link of
        # pybullet joint i; the base is the root, link 0). With URDF_MAINTAIN_LINK_ORDER and
        # links written in body order this is i + 1; checked, never assumed.
        link_to_joint = np.empty(n, dtype=np.int64)
        for link in range(n):
            info = self._call("getJointInfo", human, link)
            name = info[12].decode("utf-8")
            want = p.JOINT_SPHERICAL if self._drive_map[link + 1] >= 0 else p.JOINT_FIXED
            if info[2] != want:
                raise RuntimeError(
                    f"humanoid joint {name!r} has pybullet type {info[2]}, expected {want}"
                )
            link_to_joint[link] = self.body.names.index(name)
        if not np.array_equal(link_to_joint, np.arange(1, n + 1)):
            raise RuntimeError(
                f"humanoid URDF {str(self._urdf_path)!r}: pybullet ordered its links "
                "differently from the body record"
            )
        self._link_to_joint = link_to_joint
        masses = [self._call("getDynamicsInfo", human, link)[0] for link in range(-1, n)]
        want = [shape.mass_kg for shape in self.body.shapes]
        if not np.allclose(masses, want, rtol=1e-6, atol=1e-9):
            raise RuntimeError(
                f"humanoid URDF {str(self._urdf_path)!r}: pybullet read link masses "
                f"{masses[:4]}... that differ from the body record {want[:4]}..."
            )
        for link in range(-1, n):
            friction = self.link_root_friction if link < 0 else self.human_friction
            self._call("changeDynamics", human, link, lateralFriction=friction)
            self._call("changeDynamics", human, link, restitution=RESTITUTION)
            self._call("changeDynamics", human, link, collisionMargin=COLLISION_MARGIN_M)
            self._call("setCollisionFilterGroupMask", human, link, _HUMAN_FILTER_GROUP, _ALL_FILTER)
        info = self._call("getDynamicsInfo", human, -1)
        if np.abs(np.asarray(info[4]) - IDENTITY_QUAT).max() > 1e-9:
            raise RuntimeError("humanoid base inertial frame is rotated; expected axis-aligned")
        self._base_com_local = np.asarray(info[3], dtype=np.float64)

    # ================================================================== episode
    def _reset_engine(self, frame: np.ndarray) -> RealizedState:
        """Rebuild the world, place the humanoid exactly at ``frame`` and clear the drives."""
        self._saved_states.clear()  # resetSimulation discards pybullet's saved states
        if not self._pristine:
            assert self._scene is not None
            self._call("resetSimulation")
            self._populate(self._scene)
        self._pristine = False
        rot = self.frame_link_rotations(frame)
        root_pos = frame[0:3]
        com = root_pos + quat_rotate(rot[0], self._base_com_local)
        self._call("resetBasePositionAndOrientation", self._human, com.tolist(), rot[0].tolist())
        self._call("resetBaseVelocity", self._human, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
        self._call(
            "resetJointStatesMultiDof",
            self._human,
            self._drive_links,
            rot[1 + self._drive_idx].tolist(),
            targetVelocities=self._drive_zero_vel,
        )
        self._prev_gen = frame.copy()
        self._prev_gen_rot = rot
        self._pjsc_command = rot[1:].copy()
        self._frames_since_reset = 0
        self._stepped = False
        self._apply_motors()
        return self._read_state()

    def _apply_motors(self) -> None:
        self._call(
            "setJointMotorControlMultiDofArray",
            self._human,
            self._drive_links,
            self._p.POSITION_CONTROL,
            targetPositions=self._pjsc_command[self._drive_idx].tolist(),
            positionGains=self._motor_gains,
            forces=self._motor_forces,
        )

    def _substep(self, sub: int) -> None:
        """Substep ``sub`` of the frame (with ``release_arithmetic``, after aiming the
        motors at the release's expected rotations of that substep)."""
        if self.release_arithmetic:
            self._call(
                "setJointMotorControlMultiDofArray",
                self._human,
                self._drive_links,
                self._p.POSITION_CONTROL,
                targetPositions=self._release_targets[sub].tolist(),
                positionGains=self._release_gains,
                velocityGains=self._release_velocity_gains,
                forces=self._release_forces,
            )
        self._call("stepSimulation")

    def _read_state(self) -> RealizedState:
        com, quat = self._call("getBasePositionAndOrientation", self._human)
        rot = np.tile(IDENTITY_QUAT, (self.body.num_links, 1))  # held links: at rest
        rot[0] = quat
        states = self._call("getJointStatesMultiDof", self._human, self._drive_links)
        rot[1 + self._drive_idx] = [s[0] for s in states]
        pos = np.asarray(com, dtype=np.float64) - quat_rotate(rot[0], self._base_com_local)
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(rot))):
            raise RuntimeError("pybullet simulation diverged: the humanoid state is not finite")
        return RealizedState(pos, rot)

    def _write_root_velocity(self, v_root_xz: np.ndarray, omega_world: np.ndarray | None) -> None:
        """Write the base velocity so that the pelvis joint moves at ``v_root_xz`` (x, z).

        The vertical velocity is kept (gravity/contacts own it). ``omega_world`` replaces the
        angular velocity when given, else the current one is kept. pybullet's base velocity
        is that of the base's centre of mass, which sits ``c`` away from the pelvis joint:
        ``v_joint = v_com + omega x (-c)``, hence the horizontal ``v_com`` written below.
        """
        lin, ang = self._call("getBaseVelocity", self._human)
        omega = np.asarray(ang, dtype=np.float64) if omega_world is None else omega_world
        _, quat = self._call("getBasePositionAndOrientation", self._human)
        com_to_joint = self._root_lever(quat)
        # horizontal components of omega x com_to_joint
        lever_x = omega[1] * com_to_joint[2] - omega[2] * com_to_joint[1]
        lever_z = omega[0] * com_to_joint[1] - omega[1] * com_to_joint[0]
        v_com = [float(v_root_xz[0] - lever_x), lin[1], float(v_root_xz[1] - lever_z)]
        self._call("resetBaseVelocity", self._human, v_com, omega.tolist())

    def _step_engine(self, frame: np.ndarray) -> RealizedState:
        """One generated 30 Hz frame: drives, then 4 substeps of 1/120 s."""
        gen_rot = self.frame_link_rotations(frame)
        prev_rot = self._prev_gen_rot
        if self.release_arithmetic and first_in_chunk(self._frames_since_reset):
            # the release's first frame of a chunk: no translation command (the displacement
            # from the previous chunk's last frame is dropped)
            self._prev_gen[0:3] = frame[0:3]
        self._frames_since_reset += 1

        # -- Root x/z velocity: difference of consecutive generated root positions * 30 Hz.
        v_root_xz = (frame[[0, 2]] - self._prev_gen[[0, 2]]) * FRAME_RATE_HZ

        # -- Root angular velocity (world frame), shortest arc, capped at 30 deg per frame:
        # blend of the generated delta and the correction realized -> generated.
        g_root = self.root_correction_gain
        root_gen = quat_log(quat_mul(gen_rot[0], quat_conj(prev_rot[0])))
        root_corr = quat_log(quat_mul(gen_rot[0], quat_conj(self._real_rot[0])))
        root_delta = cap_rotvec(
            (1.0 - g_root) * root_gen + g_root * root_corr, MAX_DRIVE_PER_FRAME_RAD
        )
        omega_world = root_delta * FRAME_RATE_HZ

        if self.release_arithmetic:
            self._release_joint_drive(gen_rot)
        else:
            self._joint_drive(gen_rot, prev_rot)

        # -- Four substeps. x/z velocity before substeps 0 and 2 (contacts may change it in
        # substeps 1 and 3), angular velocity before substep 0 only.
        self._pristine = False
        self._stepped = True
        if self.root_gravity_mode is not None:
            self._root_gravity_substeps(frame, v_root_xz, omega_world)
        else:
            for sub in range(SUBSTEPS_PER_FRAME):
                if sub in ROOT_VELOCITY_SUBSTEPS:
                    self._write_root_velocity(
                        v_root_xz, omega_world if sub == ROOT_ANGULAR_SUBSTEP else None
                    )
                self._substep(sub)
        self._prev_gen = frame.copy()
        self._prev_gen_rot = gen_rot
        return self._read_state()

    def _joint_drive(self, gen_rot: np.ndarray, prev_rot: np.ndarray) -> None:
        """This backend's joint drive: PJSC commands, motor targets, joint velocities."""
        # -- Joint drives with PJSC (local joint frames, shortest arcs). The expected pose
        # integrates the *uncapped* generated delta from the reset pose, which is exactly
        # the generated pose, so ``gen_rot`` is the PJSC target. The drive command moves by
        #   delta = (1 - g) * generated_delta + g * log(command^-1 * expected),
        # capped at 30 deg, and the motor target is kept within 30 deg of the realized
        # rotation (pybullet ignores velocity limits of spherical motors, so the cap is
        # enforced on the target). See docs/physics.md for why the command, not the realized
        # rotation, is the base of the increment.
        real_joint = self._real_rot[1:]
        gen_delta = quat_log(quat_mul(quat_conj(prev_rot[1:]), gen_rot[1:]))
        corr = quat_log(quat_mul(quat_conj(self._pjsc_command), gen_rot[1:]))
        g = self._pjsc_col
        delta = cap_rotvec((1.0 - g) * gen_delta + g * corr, MAX_DRIVE_PER_FRAME_RAD)
        wanted = quat_mul(self._pjsc_command, quat_exp(delta))
        lead = cap_rotvec(
            quat_log(quat_mul(quat_conj(real_joint), wanted)), MAX_DRIVE_PER_FRAME_RAD
        )
        self._pjsc_command = quat_mul(real_joint, quat_exp(lead))
        self._apply_motors()
        # -- Joint velocity drive: every joint starts the frame moving at the (capped) rate
        # that carries its realized rotation onto the command in one frame, written once
        # before substep 0 (pybullet's spherical joint velocity is the child-frame angular
        # velocity). The motors then only correct what gravity and contacts change within
        # the frame; without this the 23 coupled motor rows are left to converge in the
        # solver's iterations and every joint lags (docs/physics.md, "Joint velocity drive").
        drive = self._drive_idx
        self._call(
            "resetJointStatesMultiDof",
            self._human,
            self._drive_links,
            real_joint[drive].tolist(),
            targetVelocities=(lead[drive] * FRAME_RATE_HZ).tolist(),
        )

    def _release_joint_drive(self, gen_rot: np.ndarray) -> None:
        """The release's joint drive (``release_arithmetic``): the capped shortest-arc
        velocity from the realized to the generated rotation, written once; the motor
        targets of the four substeps kept for :meth:`_substep`."""
        drive = self._drive_idx
        real = self._real_rot[1 + drive]
        velocity, targets = joint_drive(real, gen_rot[1 + drive], 1.0 / FRAME_RATE_HZ)
        self._release_targets = targets
        self._call(
            "resetJointStatesMultiDof",
            self._human,
            self._drive_links,
            real.tolist(),
            targetVelocities=velocity.tolist(),
        )

    def _root_lever(self, quat: Any) -> np.ndarray:
        """From the base's centre of mass to the pelvis joint, world; zero with
        ``release_arithmetic`` (the release commands the base's own velocity)."""
        if self.release_arithmetic:
            return np.zeros(3)
        return -quat_rotate(np.asarray(quat, dtype=np.float64), self._base_com_local)

    def _root_joint_velocity(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(v_joint, omega, com_to_joint)``: the pelvis joint's world velocity, the base's
        angular velocity and the lever from the base's centre of mass to the joint."""
        lin, ang = self._call("getBaseVelocity", self._human)
        _, quat = self._call("getBasePositionAndOrientation", self._human)
        lever = self._root_lever(quat)
        omega = np.asarray(ang, dtype=np.float64)
        return np.asarray(lin, dtype=np.float64) + np.cross(omega, lever), omega, lever

    def _set_root_joint_velocity(
        self, v_joint: np.ndarray, omega: np.ndarray, lever: np.ndarray
    ) -> None:
        v_com = v_joint - np.cross(omega, lever)
        self._call("resetBaseVelocity", self._human, v_com.tolist(), omega.tolist())

    def _apply_object_weights(self) -> None:
        """Each dynamic object's weight at its centre of mass, for the next substep
        (pybullet clears external forces after every step)."""
        for body, weight in zip(self._dynamic_bodies, self._dynamic_weight, strict=True):
            com, _ = self._call("getBasePositionAndOrientation", body)
            self._call(
                "applyExternalForce", body, -1, [0.0, -float(weight), 0.0], com, self._p.WORLD_FRAME
            )

    def _root_gravity_substeps(
        self, frame: np.ndarray, v_root_xz: np.ndarray, omega_world: np.ndarray
    ) -> None:
        """The four substeps with the reference release's root-only gravity (see
        :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`): the vertical root command
        before substep 0, the gravity bias per ``root_gravity_mode``, the objects' weight."""
        g = GRAVITY_M_S2 * self.root_gravity_scale
        mode = self.root_gravity_mode
        v_joint, _, _ = self._root_joint_velocity()
        v_y = (frame[1] - self._prev_gen[1]) * FRAME_RATE_HZ
        if self.inherit_downward_root_y_velocity:
            v_y += min(0.0, float(v_joint[1]))
        if mode == "pre":
            v_y -= g / FRAME_RATE_HZ
        for sub in range(SUBSTEPS_PER_FRAME):
            v_joint, omega, lever = self._root_joint_velocity()
            if sub in ROOT_VELOCITY_SUBSTEPS:
                v_joint[0], v_joint[2] = v_root_xz
            if sub == ROOT_ANGULAR_SUBSTEP:
                omega = omega_world
                v_joint[1] = v_y
            if mode == "midpoint":
                v_joint[1] -= 0.5 * g * SUBSTEP_S
            elif mode == "substep":
                v_joint[1] -= g * SUBSTEP_S
            self._set_root_joint_velocity(v_joint, omega, lever)
            self._apply_object_weights()
            self._substep(sub)
            if mode == "midpoint":
                v_joint, omega, lever = self._root_joint_velocity()
                v_joint[1] -= 0.5 * g * SUBSTEP_S
                self._set_root_joint_velocity(v_joint, omega, lever)

    # ================================================================== readouts
    def link_poses(self) -> np.ndarray:
        """World pose ``[x, y, z, qx, qy, qz, qw]`` of every link frame (= joint frame),
        rows in ``body.names`` order, ``float64 (L, 7)``."""
        self._require_episode("link_poses")
        out = np.empty((self.body.num_links, 7))
        out[0, 0:3] = self._real_pos
        out[0, 3:7] = self._real_rot[0]
        states = self._call("getLinkStates", self._human, self._links, computeForwardKinematics=1)
        for link, state in enumerate(states):
            row = self._link_to_joint[link]
            out[row, 0:3] = state[4]  # worldLinkFramePosition (URDF link frame, not the COM)
            out[row, 3:7] = state[5]
        return out

    def object_poses(self) -> np.ndarray:
        """World pose of every dynamic object's frame (not its centre of mass), ``(M, 7)``."""
        self._require_built("object_poses")
        out = np.empty((len(self._dynamic_bodies), 7))
        for row, body in enumerate(self._dynamic_bodies):
            com, quat = self._call("getBasePositionAndOrientation", body)
            q = np.asarray(quat, dtype=np.float64)
            out[row, 0:3] = np.asarray(com) - quat_rotate(q, self._dynamic_com_local[row])
            out[row, 3:7] = q
        return out

    def contacts(self, parts: bool = True) -> np.ndarray:
        """Contact points of the current state (:data:`CONTACT_DTYPE` rows), computed on call.

        Returned: every humanoid-vs-object point (``a = HUMAN_ID``, ``link_a`` = skeleton
        joint index), every dynamic-vs-dynamic point and every dynamic-vs-static point
        (object rows with ``a < b``); static bodies never touch each other in Bullet. With
        ``parts`` an object's ``link`` field is the index of its part nearest to the contact
        point (else -1: the search is most of the query's cost).

        After a substep these are Bullet's contact-manifold points of the last substep (found
        at the start of that 1/120 s substep). Bullet keeps a manifold point until it
        separates by more than its contact-breaking distance, so ``distance`` may be slightly
        positive (a near contact); consumers needing touching contacts filter
        ``distance <= 0``. Right after :meth:`reset`, before any substep, there are no
        manifolds yet: the rows are then exact closest-point queries (``distance <= 0``)
        at the placed pose, e.g. for the initial-penetration check. Neither path changes the
        simulation (no collision pass is run outside ``stepSimulation``).
        """
        self._require_episode("contacts")
        return self._contact_batch([self._frame_contacts(parts)], parts)[0]

    def _frame_contacts(self, parts: bool) -> Any:
        """Bullet's contact tuples of the current state; with ``parts`` already the rows
        (the nearest-part search reads the objects' current poses)."""
        raw = self._call("getContactPoints") if self._stepped else self._closest_points()
        if not parts:
            return raw
        rows = self._contact_rows([raw])[0]
        self._resolve_parts(rows)
        return rows

    def _contact_batch(self, queries: list[Any], parts: bool) -> list[np.ndarray]:
        return list(queries) if parts else self._contact_rows(queries)

    def _contact_rows(self, raws: list[Any]) -> list[np.ndarray]:
        """The rows of each list of Bullet contact tuples in ``raws``, made all at once
        (elementwise selections: the same as one by one); objects' part fields -1."""
        counts = [len(raw) for raw in raws]
        flat = [cp for raw in raws for cp in raw]
        if not flat:
            return [empty_contacts() for _ in raws]
        bodies = np.array([cp[1:5] for cp in flat], dtype=np.int64)  # body a/b, link a/b
        pos_a = np.array([cp[5] for cp in flat], dtype=np.float64)
        pos_b = np.array([cp[6] for cp in flat], dtype=np.float64)
        distance = np.array([cp[8] for cp in flat], dtype=np.float64)
        object_of, dynamic = self._body_lookup(int(bodies[:, 0:2].max()))
        human = self._human
        swap = bodies[:, 1] == human  # the humanoid goes first
        body_a = np.where(swap, bodies[:, 1], bodies[:, 0])
        body_b = np.where(swap, bodies[:, 0], bodies[:, 1])
        link = np.where(swap, bodies[:, 3], bodies[:, 2])
        pa = np.where(swap[:, None], pos_b, pos_a)
        pb = np.where(swap[:, None], pos_a, pos_b)
        obj_a, obj_b = object_of[body_a], object_of[body_b]
        is_human = body_a == human
        # humanoid rows against an object (not itself); object rows with a movable one
        keep = np.where(
            is_human,
            obj_b >= 0,
            (dynamic[body_a] | dynamic[body_b]) & (obj_a >= 0) & (obj_b >= 0),
        )
        order = ~is_human & (obj_a > obj_b)  # object rows: a < b
        joint = self._link_to_joint[np.clip(link, 0, len(self._link_to_joint) - 1)]
        out = np.zeros(int(keep.sum()), dtype=CONTACT_DTYPE)
        out["a"] = np.where(is_human, HUMAN_ID, np.where(order, obj_b, obj_a))[keep]
        out["link_a"] = np.where(is_human, np.where(link < 0, 0, joint), -1)[keep]
        out["b"] = np.where(order, obj_a, obj_b)[keep]
        out["link_b"] = -1
        out["pos_a"] = np.where(order[:, None], pb, pa)[keep]
        out["pos_b"] = np.where(order[:, None], pa, pb)[keep]
        out["distance"] = distance[keep]
        frame = np.repeat(np.arange(len(raws)), counts)[keep]
        ends = np.cumsum(np.bincount(frame, minlength=len(raws)))
        return [out[start:end] for start, end in zip((0, *ends[:-1]), ends, strict=True)]

    def _body_lookup(self, largest: int) -> tuple[np.ndarray, np.ndarray]:
        """``(object id or -1, movable)`` of every body uid up to at least ``largest``."""
        lookup = self._bodies
        if lookup is None or len(lookup[0]) <= largest:
            size = max(largest, self._human, *self._body_to_object, 0) + 1
            object_of = np.full(size, -1, dtype=np.int64)
            dynamic = np.zeros(size, dtype=bool)
            for body, object_id in self._body_to_object.items():
                object_of[body] = object_id
            dynamic[list(self._dynamic_body_set)] = True
            lookup = self._bodies = (object_of, dynamic)
        return lookup

    def _resolve_parts(self, out: np.ndarray) -> None:
        """Write into the object ``link`` fields of the rows ``out`` the part of the object
        whose surface is nearest to the row's point on it (0 for one-part objects), all
        points at once; each dynamic object's pose is read once."""
        queries: list[tuple[int, str, int, Any]] = []  # (row, field, object, point)
        for row, (a, b, pos_a, pos_b) in enumerate(
            zip(out["a"].tolist(), out["b"].tolist(), out["pos_a"], out["pos_b"], strict=True)
        ):
            if a != HUMAN_ID:
                queries.append((row, "link_a", a, pos_a))
            queries.append((row, "link_b", b, pos_b))
        out["link_b"] = 0
        out["link_a"] = np.where(out["a"] == HUMAN_ID, out["link_a"], 0)
        objects = self._objects
        todo = [q for q in queries if len(objects[q[2]].parts) > 1]
        if not todo:
            return
        if self._parts is None:
            self._parts = _PartIndex.of(objects)
        ids = [q[2] for q in todo]
        origin, inverse = self._parts.poses(ids)
        for obj_id in set(ids):
            body = self._object_bodies[obj_id]
            if body in self._dynamic_body_set:
                com, q = self._call("getBasePositionAndOrientation", body)
                quat = np.asarray(q, dtype=np.float64)
                row = self._dynamic_bodies.index(body)
                at = [k for k, i in enumerate(ids) if i == obj_id]
                origin[at] = np.asarray(com) - quat_rotate(quat, self._dynamic_com_local[row])
                inverse[at] = quat_conj(quat)
        points = np.array([q[3] for q in todo], dtype=np.float64)
        local = quat_rotate(inverse, points - origin)  # world -> each object's frame
        nearest = np.argmin(self._parts.distances(ids, local), axis=-1)
        for field in ("link_a", "link_b"):
            at = [k for k, q in enumerate(todo) if q[1] == field]
            if at:
                out[field][[todo[k][0] for k in at]] = nearest[at]

    def _closest_points(self) -> list[tuple]:
        """Touching/penetrating closest points (pybullet contact tuples) of the humanoid and
        of every dynamic object against everything their AABBs overlap. Pure queries."""
        human = self._human
        movers = [(human, list(range(-1, len(self._links))))]
        movers += [(body, [-1]) for body in self._dynamic_bodies]
        done: set[tuple[int, int]] = set()
        points: list[tuple] = []
        for body, links in movers:
            lo = np.full(3, np.inf)
            hi = np.full(3, -np.inf)
            for link in links:
                a, b = self._call("getAABB", body, link)
                lo = np.minimum(lo, a)
                hi = np.maximum(hi, b)
            overlapping = self._call("getOverlappingObjects", lo.tolist(), hi.tolist()) or ()
            for other in sorted({uid for uid, _ in overlapping}):
                pair = (min(body, other), max(body, other))
                if other == body or pair in done:
                    continue
                done.add(pair)
                points.extend(self._call("getClosestPoints", body, other, 0.0))
        return points

    def _ray_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        """``rayTest`` with a filter mask that leaves out the humanoid's group."""
        hit = self._call("rayTest", [x, from_y, z], [x, to_y, z], collisionFilterMask=_RAY_MASK)[0]
        if hit[0] < 0 or hit[0] == self._human:
            return None
        return float(hit[3][1])

    # ================================================================== snapshots
    def _snapshot(self) -> _Snapshot:
        """``saveState`` plus the drive state; the saved state is released when the
        snapshot is garbage-collected (or at the next reset)."""
        state_id = int(self._call("saveState"))
        self._saved_states.add(state_id)
        snap = _Snapshot(
            owner=id(self),
            episode=self._episode,
            state_id=state_id,
            prev_gen=self._prev_gen.copy(),
            prev_rot=self._prev_gen_rot.copy(),
            command=self._pjsc_command.copy(),
            stepped=self._stepped,
            frame_index=self._frames_since_reset,
        )
        weakref.finalize(snap, _release_state, weakref.ref(self), self._episode, state_id)
        return snap

    def _snapshot_live(self, state: Any) -> bool:
        return isinstance(state, _Snapshot) and state.state_id in self._saved_states

    def _restore(self, state: _Snapshot) -> RealizedState:
        self._call("restoreState", state.state_id)
        self._pristine = False
        self._prev_gen = state.prev_gen.copy()
        self._prev_gen_rot = state.prev_rot.copy()
        self._pjsc_command = state.command.copy()
        self._stepped = state.stepped
        self._frames_since_reset = state.frame_index
        self._apply_motors()
        return self._read_state()

    def _forget_saved_state(self, episode: int, state_id: int) -> None:
        if self._client is None or episode != self._episode or state_id not in self._saved_states:
            return
        self._saved_states.discard(state_id)
        try:
            self._call("removeState", state_id)
        except Exception:  # noqa: BLE001 - best effort
            pass


def _parts_centroid(obj: SceneObject) -> np.ndarray:
    """Volume-weighted centroid of an object's parts, object frame."""
    total = 0.0
    acc = np.zeros(3)
    for part in obj.parts:
        volume = part_volume(part.shape, part.size)  # a mesh: its bounding box
        total += volume
        acc += volume * np.asarray(part.offset)
    if total <= 0.0:  # flat meshes only
        return np.mean([part.offset for part in obj.parts], axis=0)
    return acc / total


@dataclass(frozen=True)
class _PartIndex:
    """The parts of a scene's multi-part objects as padded arrays, for the nearest-part
    query of contact rows (objects with fewer parts are padded with parts never nearest)."""

    row: dict[int, int]  # object id -> row of the arrays below
    count: np.ndarray  # (N,) parts of each object
    origin: np.ndarray  # (N, 3) object frame origins, world (as placed)
    inverse: np.ndarray  # (N, 4) world -> object rotations (as placed)
    offsets: np.ndarray  # (N, P, 3) part centres, object frame
    sizes: np.ndarray  # (N, P, 3) half extents / radius, half height
    box: np.ndarray  # (N, P) a box or a mesh (its bounding box, unturned)
    cylinder: np.ndarray  # (N, P) a cylinder
    sphere: np.ndarray  # (N, P) a sphere; a part that is none of the three is padding

    @classmethod
    def of(cls, objects: dict[int, SceneObject]) -> _PartIndex:
        multi = [obj for obj in objects.values() if len(obj.parts) > 1]
        n, width = len(multi), max((len(obj.parts) for obj in multi), default=1)
        offsets, sizes = np.zeros((n, width, 3)), np.ones((n, width, 3))
        shapes = np.full((n, width), "", dtype=object)
        for i, obj in enumerate(multi):
            k = len(obj.parts)
            offsets[i, :k] = [part.offset for part in obj.parts]
            sizes[i, :k] = [part.size for part in obj.parts]
            shapes[i, :k] = [part.shape for part in obj.parts]
        box = (shapes == "box") | (shapes == "mesh")
        cylinder = shapes == "cylinder"
        return cls(
            row={obj.object_id: i for i, obj in enumerate(multi)},
            count=np.array([len(obj.parts) for obj in multi], dtype=np.int64),
            origin=np.array([obj.position for obj in multi], dtype=np.float64).reshape(n, 3),
            inverse=quat_conj(
                np.array([obj.quat_xyzw() for obj in multi], dtype=np.float64).reshape(n, 4)
            ),
            offsets=offsets,
            sizes=sizes,
            box=box,
            cylinder=cylinder,
            sphere=(shapes != "") & ~box & ~cylinder,
        )

    def poses(self, object_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(origins (k, 3), world -> object rotations (k, 4))`` as placed, new arrays."""
        rows = [self.row[i] for i in object_ids]
        return self.origin[rows], self.inverse[rows]

    def distances(self, object_ids: list[int], local: np.ndarray) -> np.ndarray:
        """Unsigned distance from each point ``(k, 3)`` (its object's frame) to each part of
        its object, ``(k, W)`` with ``W`` the most parts of the queried objects (padding:
        infinite)."""
        rows = [self.row[i] for i in object_ids]
        width = int(self.count[rows].max())  # the padding the queried objects need
        p = local[:, None, :] - self.offsets[rows, :width]
        size, box = self.sizes[rows, :width], self.box[rows, :width]
        cyl, sph = self.cylinder[rows, :width], self.sphere[rows, :width]
        radial = np.hypot(p[..., 0], p[..., 2])
        # box: |p| - half extents; cylinder: (radial - radius, |y| - half height, -inf)
        cylinder = np.stack(
            [
                radial - size[..., 0],
                np.abs(p[..., 1]) - size[..., 1],
                np.full_like(radial, -np.inf),
            ],
            axis=-1,
        )
        q = np.where(box[..., None], np.abs(p) - size, cylinder)
        outside = np.sqrt(np.sum(np.square(np.maximum(q, 0.0)), axis=-1))
        solid = np.where(outside > 0.0, outside, -np.max(q, axis=-1))
        sphere = np.abs(np.sqrt(np.sum(np.square(p), axis=-1)) - size[..., 0])
        out = np.where(box | cyl, solid, sphere)
        out[~(box | cyl | sph)] = np.inf
        return out
