"""MuJoCo implementation of the half-physics frame contract (``physics="mujoco"``).

The same contract as :mod:`humanclaw_gym.physics.pybullet_backend` (``docs/physics.md``
states every clause and where this backend's mechanics differ); one generated 30 Hz frame
(:meth:`MujocoHalfPhysics.step_frame`):

1. Drives from the previous generated frame, the new one and the realized state: root x/z
   velocity, root angular velocity and a PJSC command per joint (shortest arcs, 30 degrees
   per frame at most, PJSC gain 1.0 for every joint by default). Before substep 0 every
   joint's velocity is set to the rate that reaches its command in one frame (the joint
   velocity drive) and the root's angular and x/z velocity are written.
2. Four MuJoCo steps of 1/120 s (``implicitfast``). The root x/z velocity is written again
   before substep 2; gravity and contacts act on every substep (vertical root motion is
   never written).
3. The realized state is read back once (into this backend's buffers, which the compiled
   drive reads at the next frame) and returned to the base, which keeps a copy.

The model is MJCF text generated here from the skeleton and the scene: the humanoid is a
free-floating pelvis with 23 ball joints, each driven natively by three position actuators
(``gear`` on the joint's local axes; the actuator length of a ball joint is the rotation
vector of its quaternion), whose stiffness is clamped at the same per-joint torques as
pybullet's motors, while the joint damping sits on the joints (``dof_damping``, integrated
implicitly; a clamped actuator damping lets light links such as hands and toes blow up).
The drive maths runs compiled (:mod:`humanclaw_gym.physics._mujoco_drive`, numba). The
bookkeeping around the engine calls (argument checks, lifecycle, readouts of the realized
state, the contract record) is :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`'s, and
the humanoid's bodies are written from its ``body``; the drive state (the previous
generated frame, the PJSC commands, the frames since reset) is this backend's own.
``mujoco`` is imported only inside :meth:`MujocoHalfPhysics.build`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.backends.protocols import PhysicsCapabilities
from humanclaw_gym.body.model import BodyModel, LinkMesh
from humanclaw_gym.body.urdf import shape_principal_inertia
from humanclaw_gym.physics import _mujoco_drive as drive
from humanclaw_gym.physics.base import (
    CYLINDER_Z_TO_Y,
    IDENTITY_QUAT,
    PARK_POSITION,
    HalfPhysicsBase,
    PhysicsOption,
    PhysicsSnapshot,
    RealizedState,
    RecordedFrames,
    part_volume,
    physics_options,
)
from humanclaw_gym.physics.contract import (
    FRAME_RATE_HZ,
    FRAMES_PER_CHUNK,
    GRAVITY_M_S2,
    MAX_DRIVE_PER_FRAME_RAD,
    ROOT_VELOCITY_SUBSTEPS,
    SCENE_FRICTION,
    SUBSTEP_S,
    SUBSTEPS_PER_FRAME,
)
from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID, empty_contacts

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.scenes.spec import SceneObject, SceneSpec

__all__ = [
    "CONTACT_MARGIN_M",
    "CONTACT_SOLIMP",
    "CONTACT_SOLREF",
    "MujocoHalfPhysics",
]

#: ``contacts()`` reports pairs closer than this (metres), like pybullet's near contacts;
#: contacts push only once the surfaces touch (the model's margin is 0).
CONTACT_MARGIN_M = 0.01
#: Contact softness: time constant (s) and damping ratio. The time constant is MuJoCo's
#: smallest safe value at 1/120 s substeps (2 substeps): walls and floors give way less
#: than with MuJoCo's default 0.02 s (docs/physics.md, "The MuJoCo backend").
CONTACT_SOLREF: tuple[float, float] = (2.0 * SUBSTEP_S, 1.0)
#: Contact impedance (d0, dwidth, width, midpoint, power): MuJoCo's default, on every geom.
#: A stiffer impedance everywhere made the Newton solver stop at its iteration cap on 6 % of
#: the substeps of a walk and cost about 20 % more; a stiffer one on the feet only (once used
#: against twisted light toes, which the heavier toes cured) cost 70 % more iterations
#: (docs/physics.md, "The MuJoCo backend").
CONTACT_SOLIMP: tuple[float, float, float, float, float] = (0.9, 0.95, 0.001, 0.5, 2.0)
# Joint drives, from each joint's torque cap (pybullet's motor torques). The joint damping
# reaches the cap at the largest drive velocity (30 degrees per frame); integrated
# implicitly, it holds the joint on the velocity drive's path, and its feed-forward at the
# drive velocity, clamped at the cap, cancels it on the path. A blocked limb therefore
# pushes with at most the cap from the feed-forward plus the cap of the spring.
_DAMPING_CAP_VELOCITY_RAD_S = MAX_DRIVE_PER_FRAME_RAD * FRAME_RATE_HZ
# The position actuator (the spring) reaches the cap at this error (rad), unless the
# joint's effective inertia needs a softer spring for the explicit stiffness to stay stable.
_STIFFNESS_CAP_ERROR_RAD = 0.3
# Rotor inertia added to every ball-joint dof (kg m^2): keeps the lightest links stable.
_ARMATURE = 2e-3
_HUMAN_GROUP = 1  # geom group of the humanoid (rays see only group 0)
# root_gravity_mode -> the code the compiled drive takes
_GRAVITY_MODE_CODES = {None: 0, "pre": 1, "substep": 2, "midpoint": 3}


def _check_target_ramp(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"target_ramp must be a bool, got {value!r}")
    return value


def _fmt(values: Any) -> str:
    return " ".join(f"{float(v):.17g}" for v in np.ravel(values))


def _wxyz(q_xyzw: Any) -> tuple[float, float, float, float]:
    x, y, z, w = (float(v) for v in q_xyzw)
    return (w, x, y, z)


def _quat_matrix(q_xyzw: Any) -> np.ndarray:
    x, y, z, w = (float(v) for v in q_xyzw)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


# MuJoCo cylinders run along local +Z; scene cylinders along +Y.
_CYLINDER_Z_TO_Y = _wxyz(CYLINDER_Z_TO_Y)


def _human_mjcf(
    body: BodyModel,
    root_friction: float | None = None,
    gravcomp: bool = False,
    geoms: list[tuple[str, int]] | None = None,
    meshes: list[str] | None = None,
) -> str:
    """The humanoid's bodies (nested after ``body.parents``), its joints and geoms.

    Primitive links get one geom named ``h_<link>``; mesh links (:class:`LinkMesh`) one
    geom ``h_<link>_<k>`` per mesh (MuJoCo collides each as its convex hull), whose
    ``<mesh>`` asset is appended to ``meshes``; ``geoms`` collects ``(geom name, link)``.
    ``root_friction`` sets the root link's friction; ``gravcomp`` cancels gravity on every
    humanoid body (the reference release's root-only gravity).
    """
    shapes = body.shapes
    children = body.children()
    geoms = [] if geoms is None else geoms
    meshes = [] if meshes is None else meshes

    def friction(j: int) -> str:
        if j == 0 and root_friction is not None:
            return f' friction="{root_friction:.17g} 0.005 0.0001"'
        return ""

    def geom(j: int) -> str:
        s = shapes[j]
        name = body.names[j]
        if isinstance(s, LinkMesh):
            out = []
            for k, (vertices, faces) in enumerate(s.parts):
                mesh = f"m_{name}_{k}"
                meshes.append(
                    f'    <mesh name="{mesh}" vertex="{_fmt(vertices)}" face="{_fmt_int(faces)}"/>\n'
                )
                geoms.append((f"h_{name}_{k}", j))
                out.append(
                    f'<geom name="h_{name}_{k}" type="mesh" mesh="{mesh}" class="human"'
                    f"{friction(j)}/>"
                )
            return "".join(out)
        geoms.append((f"h_{name}", j))
        common = (
            f'name="h_{name}" pos="{_fmt(s.offset_m)}" '
            f'quat="{_fmt(_wxyz(s.quat_xyzw))}" class="human"{friction(j)}'
        )
        if s.kind == "capsule":
            return f'<geom type="capsule" size="{s.radius:.17g} {s.half_length:.17g}" {common}/>'
        if s.kind == "box":
            return f'<geom type="box" size="{_fmt(s.half_extents)}" {common}/>'
        return f'<geom type="sphere" size="{s.radius:.17g}" {common}/>'

    def inertial(j: int) -> str:
        s = shapes[j]
        if isinstance(s, LinkMesh):
            ixx, iyy, izz, ixy, ixz, iyz = s.inertia
            return (
                f'<inertial pos="{_fmt(s.com_m)}" mass="{s.mass_kg:.17g}" '
                f'fullinertia="{_fmt((ixx, iyy, izz, ixy, ixz, iyz))}"/>'
            )
        rot = _quat_matrix(s.quat_xyzw)
        t = rot @ np.diag(shape_principal_inertia(s)) @ rot.T
        full = (t[0, 0], t[1, 1], t[2, 2], t[0, 1], t[0, 2], t[1, 2])
        return (
            f'<inertial pos="{_fmt(s.offset_m)}" mass="{s.mass_kg:.17g}" '
            f'fullinertia="{_fmt(full)}"/>'
        )

    comp = ' gravcomp="1"' if gravcomp else ""

    drive = body.drive_map

    def nested(j: int, depth: int) -> str:
        pad = "  " * depth
        name = body.names[j]
        if j == 0:
            head = f'{pad}<body name="{name}" pos="{_fmt(PARK_POSITION)}"{comp}>\n'
            joint = f'{pad}  <freejoint name="root"/>\n'
        elif drive[j] < 0:  # held at rest: welded to its parent
            head = f'{pad}<body name="{name}" pos="{_fmt(body.joint_offsets_m[j])}"{comp}>\n'
            joint = ""
        else:
            head = f'{pad}<body name="{name}" pos="{_fmt(body.joint_offsets_m[j])}"{comp}>\n'
            joint = f'{pad}  <joint name="{name}" type="ball" class="human"/>\n'
        shape = geom(j)
        inner = "".join(nested(c, depth + 1) for c in children[j])
        return f"{head}{joint}{pad}  {inertial(j)}\n{pad}  {shape}\n{inner}{pad}</body>\n"

    return nested(0, 2)


def _fmt_int(values: Any) -> str:
    return " ".join(str(int(v)) for v in np.ravel(values))


def _object_mjcf(obj: SceneObject, geom_names: list[tuple[int, int]]) -> str:
    """Geoms of one scene object (in the world body when static, in a free body when
    dynamic). ``geom_names`` collects ``(object_id, part_index)`` per geom, in order."""
    lines = []
    volumes = [part_volume(part.shape, part.size) for part in obj.parts]
    total = sum(volumes)
    rot = obj.rotation()
    q_obj = obj.quat_xyzw()
    for index, part in enumerate(obj.parts):
        if part.shape not in ("box", "cylinder", "sphere"):
            raise ValueError(
                f"object {obj.name!r}: part shape {part.shape!r} is not supported by the "
                "mujoco physics backend (box, cylinder, sphere)"
            )
        geom_names.append((obj.object_id, index))
        if obj.dynamic:  # body frame = object frame
            pos = np.asarray(part.offset, dtype=np.float64)
            base_q = (1.0, 0.0, 0.0, 0.0)
            cls = "dynamic"
        else:  # world frame
            pos = np.asarray(obj.position) + rot @ np.asarray(part.offset)
            base_q = _wxyz(q_obj)
            cls = "scene"
        if part.shape == "cylinder":
            q = _qmul_wxyz(base_q, _CYLINDER_Z_TO_Y)
            size = f"{part.size[0]:.17g} {part.size[1]:.17g}"
        elif part.shape == "box":
            q = base_q
            size = _fmt(part.size)
        else:
            q = base_q
            size = f"{part.size[0]:.17g}"
        mass = ""
        if obj.dynamic:
            share = volumes[index] / total if total > 0.0 else 1.0 / len(obj.parts)
            mass = f' mass="{obj.mass_kg * share:.17g}"'
        lines.append(
            f'<geom name="o{obj.object_id}_{index}" type="{part.shape}" size="{size}" '
            f'pos="{_fmt(pos)}" quat="{_fmt(q)}" class="{cls}"{mass}/>'
        )
    if not obj.dynamic:
        return "\n".join(f"    {line}" for line in lines) + "\n"
    head = (
        f'    <body name="obj{obj.object_id}" pos="{_fmt(obj.position)}" '
        f'quat="{_fmt(_wxyz(q_obj))}">\n      <freejoint name="obj{obj.object_id}"/>\n'
    )
    return head + "".join(f"      {line}\n" for line in lines) + "    </body>\n"


def _qmul_wxyz(a: tuple, b: tuple) -> tuple[float, float, float, float]:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


@dataclass(frozen=True)
class _Snapshot(PhysicsSnapshot):
    """Opaque snapshot of :meth:`MujocoHalfPhysics.get_state`."""

    physics: np.ndarray
    prev_xz: np.ndarray
    prev_y: np.ndarray
    prev_rot: np.ndarray
    command: np.ndarray
    frame_index: int


class MujocoHalfPhysics(HalfPhysicsBase):
    """Half-physics execution of generated humanoid motion in MuJoCo.

    Every instance owns its model and data; several backends live in one process and may
    step on different threads at once (MuJoCo releases the GIL while stepping, and the
    compiled drive maths does too).

    Determinism: :meth:`reset` resets the data (``mj_resetData``: warm starts, contacts and
    every buffer) and places the objects and the humanoid, so an episode's trajectory is
    bit-identical whatever ran before it and on a fresh instance. Snapshots of
    :meth:`get_state` (MuJoCo's full integration state plus the drive state) restore exactly
    and stay valid until the next :meth:`reset`. Queries (contacts, link poses, rays) never
    change the trajectory.

    Args:
        solver_iterations: MuJoCo constraint-solver (Newton) iterations per substep at most;
            the solver stops earlier once converged.
        root_correction_gain: weight of the realized-to-generated correction in the root
            angular drive (as in pybullet: 1.0 tracks the generated orientation).
        pjsc_gains: per-joint PJSC gain overrides by joint name, each in ``[0, 1]``
            (default 1.0 for every joint; the reference contract's values are
            :data:`~humanclaw_gym.physics.contract.REFERENCE_PJSC_GAINS`).
        motor_torque_scale: multiplies every joint's maximum actuator torque (> 0).
        target_ramp: move each joint's actuator target along the frame's path substep by
            substep (True, default), or hold the frame's command for all four substeps.
        body_asset, human_friction, root_friction, root_gravity_mode, root_gravity_scale,
            inherit_downward_root_y_velocity, release_arithmetic: the body to build and the
            reference release's physics profile options, see
            :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`. A body asset's meshes,
            masses and inertias are written into the generated model as the asset holds
            them; its root-only gravity cancels gravity on every humanoid body
            (``gravcomp``). With ``release_arithmetic`` this backend takes the release's
            first-frame rule and neck/head zeroing; its joints keep this backend's drive
            (the release's joint drive is a Bullet spherical motor, which MuJoCo has not).
    """

    # no triangle meshes: MuJoCo collides a mesh as its convex hull, which would fill the
    # rooms of an imported (HSSD) home; scenes with mesh parts are refused before building
    capabilities = PhysicsCapabilities(
        name="mujoco", part_shapes=frozenset({"box", "cylinder", "sphere"})
    )
    options = physics_options(
        PhysicsOption(
            "target_ramp",
            True,
            "move each actuator target along the frame's path substep by substep (or hold it)",
            check=_check_target_ramp,
        ),
        solver_iterations=20,
    )
    #: Run frames through the compiled, GIL-free runner where it is available (tests
    #: switch it off to compare with the frame-by-frame path through the bindings).
    _compiled_frames = True

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        links = self.body.num_links

        self._mj: Any = None
        self._model: Any = None
        self._data: Any = None
        self._probe: Any = None  # an MjData the contact queries run in (made on first use)
        self._recorded = 0  # frames of the last recording run that completed
        self._kinematics_current = False
        # bookkeeping filled by build()
        self._geom_owner = np.zeros(0, dtype=np.int32)  # per geom: object id, 0 humanoid
        self._geom_part = np.zeros(0, dtype=np.int32)  # per geom: part or joint index
        self._dynamic_id_set: frozenset[int] = frozenset()
        self._dynamic_qpos_adr = np.zeros(0, dtype=np.int64)
        self._dynamic_init = np.zeros((0, 7))
        self._qpos_adr = np.zeros(links, dtype=np.int64)
        self._dof_adr = np.zeros(links, dtype=np.int64)
        self._act_adr = np.zeros(links - 1, dtype=np.int64)
        self._body_ids = np.zeros(links, dtype=np.int64)
        self._damping = np.zeros(links - 1)
        self._stiffness = np.zeros(links - 1)
        self._ray_groups = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)
        # the drive state: the previous generated root position and link rotations, the
        # joints' PJSC commands, the frames executed since reset (the release's first-frame
        # rule counts chunks by it); the compiled drive updates them in place
        self._prev_xz = np.zeros(2)
        self._prev_y = np.zeros(1)
        self._prev_gen_rot = np.tile(IDENTITY_QUAT, (links, 1))
        self._pjsc_command = np.tile(IDENTITY_QUAT, (links - 1, 1))
        self._frames_since_reset = np.zeros(1, dtype=np.int64)
        # the realized state as last read (the compiled runner writes it; the base keeps a
        # copy of what the hooks return)
        self._state_pos = np.zeros(3)
        self._state_rot = np.tile(IDENTITY_QUAT, (links, 1))
        # the substep schedule of the actuator targets
        self._ctrl_sched = np.zeros((SUBSTEPS_PER_FRAME, 3 * (links - 1)))
        self._v_root = np.zeros(2)
        self._resets_seen = 0  # MuJoCo's data resets (bad qpos/qvel/qacc) so far
        self._reset_warnings = np.zeros(0, dtype=np.int64)
        # the compiled runner's recording buffers when nothing is recorded
        self._no_record = (np.zeros((0, 0)), np.zeros((0, 3)), np.zeros((0, links, 4)))

    # ================================================================== contract
    def _contract_engine(self) -> dict[str, Any]:
        return {
            # contacts push only from zero separation on (no skin outside the geometry)
            "collision_margin_m": 0.0,
            "contact_report_margin_m": CONTACT_MARGIN_M,
            "contact_solref": list(CONTACT_SOLREF),
            "contact_solimp": list(CONTACT_SOLIMP),
            "integrator": "implicitfast",
            "damping_cap_velocity_rad_s": _DAMPING_CAP_VELOCITY_RAD_S,
            "stiffness_cap_error_rad": _STIFFNESS_CAP_ERROR_RAD,
            "armature_kg_m2": _ARMATURE,
        }

    # ================================================================== lifecycle
    def _build_engine(self, scene: SceneSpec) -> tuple[int, ...]:
        """Compile the model of the scene and the humanoid (MJCF generated here).

        Raises:
            ValueError: a part shape this backend cannot collide (meshes), naming the object.
            ImportError: ``mujoco`` is not installed (``pip install 'humanclaw-gym[mujoco]'``).
        """
        try:
            import mujoco
        except ImportError as exc:
            raise ImportError(
                "physics='mujoco' needs the mujoco package: pip install 'humanclaw-gym[mujoco]'"
            ) from exc
        xml, geom_map, dynamic, human_geoms = self._mjcf(scene)
        model = mujoco.MjModel.from_xml_string(xml)
        data = mujoco.MjData(model)
        self._mj = mujoco
        self._model = model
        self._data = data
        warn = mujoco.mjtWarning
        self._reset_warnings = np.array(
            [int(warn.mjWARN_BADQPOS), int(warn.mjWARN_BADQVEL), int(warn.mjWARN_BADQACC)],
            dtype=np.int64,
        )
        self._ctrl_sched = np.zeros((SUBSTEPS_PER_FRAME, model.nu))
        dynamic_ids = self._index(geom_map, dynamic, human_geoms)
        self._tune_drives()
        return dynamic_ids

    def _mjcf(
        self, scene: SceneSpec
    ) -> tuple[str, list[tuple[int, int]], list[SceneObject], list[tuple[str, int]]]:
        geom_map: list[tuple[int, int]] = []
        statics: list[str] = []
        dynamics: list[str] = []
        dynamic_objects: list[SceneObject] = []
        for obj in scene.objects:
            text = _object_mjcf(obj, geom_map)
            if obj.dynamic:
                dynamics.append(text)
                dynamic_objects.append(obj)
            else:
                statics.append(text)
        solref = _fmt(CONTACT_SOLREF)
        solimp = _fmt(CONTACT_SOLIMP)
        actuators = []
        for j in range(1, self.body.num_links):
            if self._drive_map[j] < 0:  # held at rest: welded to its parent, no joint
                continue
            name = self.body.names[j]
            limit = self.max_torque_nm[j - 1]
            for axis, gear in (("x", "1 0 0"), ("y", "0 1 0"), ("z", "0 0 1")):
                actuators.append(
                    f'    <position name="{name}_{axis}" joint="{name}" gear="{gear}" kp="1" '
                    f'forcelimited="true" forcerange="{-limit:.17g} {limit:.17g}"/>\n'
                )
        human_geoms: list[tuple[str, int]] = []
        mesh_assets: list[str] = []
        human = _human_mjcf(
            self.body,
            self.root_friction,
            self.root_gravity_mode is not None,
            human_geoms,
            mesh_assets,
        )
        assets = f"  <asset>\n{''.join(mesh_assets)}  </asset>\n" if mesh_assets else ""
        xml = (
            '<mujoco model="humanclaw_half_physics">\n'
            '  <compiler angle="radian" autolimits="true"/>\n'
            f'  <option timestep="{SUBSTEP_S:.17g}" gravity="0 {-GRAVITY_M_S2:.17g} 0" '
            f'integrator="implicitfast" iterations="{self.solver_iterations}"/>\n'
            "  <default>\n"
            f'    <geom solref="{solref}" solimp="{solimp}"/>\n'
            '    <default class="human">\n'
            f'      <geom contype="2" conaffinity="1" group="{_HUMAN_GROUP}" priority="1" '
            f'friction="{self.human_friction:.17g} 0.005 0.0001"/>\n'
            f'      <joint armature="{_ARMATURE}"/>\n'
            "    </default>\n"
            '    <default class="scene">\n'
            f'      <geom contype="1" conaffinity="3" group="0" friction="{SCENE_FRICTION} 0.005 0.0001"/>\n'
            "    </default>\n"
            '    <default class="dynamic">\n'
            f'      <geom contype="1" conaffinity="3" group="0" friction="{SCENE_FRICTION} 0.005 0.0001"/>\n'
            "    </default>\n"
            "  </default>\n"
            f"{assets}"
            "  <worldbody>\n"
            f"{human}"
            f"{''.join(statics)}"
            f"{''.join(dynamics)}"
            "  </worldbody>\n"
            "  <actuator>\n"
            f"{''.join(actuators)}"
            "  </actuator>\n"
            "</mujoco>\n"
        )
        return xml, geom_map, dynamic_objects, human_geoms

    def _index(
        self,
        geom_map: list[tuple[int, int]],
        dynamic: list[SceneObject],
        human_geoms: list[tuple[str, int]],
    ) -> tuple[int, ...]:
        """The model's addresses of every link, actuator and object; returns the dynamic
        objects' ids (scene order)."""
        mj, m = self._mj, self._model
        owner = np.zeros(m.ngeom, dtype=np.int32)
        part = np.zeros(m.ngeom, dtype=np.int32)
        names = self.body.names
        for geom_name, j in human_geoms:
            g = mj.mj_name2id(m, mj.mjtObj.mjOBJ_GEOM, geom_name)
            owner[g], part[g] = HUMAN_ID, j
        static_i = 0
        for object_id, index in geom_map:
            g = mj.mj_name2id(m, mj.mjtObj.mjOBJ_GEOM, f"o{object_id}_{index}")
            if g < 0:  # pragma: no cover - names are generated above
                raise RuntimeError(f"geom of object {object_id} part {index} is missing")
            owner[g], part[g] = object_id, index
            static_i += 1
        self._geom_owner, self._geom_part = owner, part
        for j, name in enumerate(names):
            b = mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, name)
            self._body_ids[j] = b
            if self._drive_map[j] < 0:  # welded: no joint, no actuator
                self._qpos_adr[j] = self._dof_adr[j] = self._act_adr[j - 1] = -1
                continue
            jnt = mj.mj_name2id(m, mj.mjtObj.mjOBJ_JOINT, "root" if j == 0 else name)
            self._qpos_adr[j] = m.jnt_qposadr[jnt]
            self._dof_adr[j] = m.jnt_dofadr[jnt]
            if j > 0:
                a = mj.mj_name2id(m, mj.mjtObj.mjOBJ_ACTUATOR, f"{name}_x")
                self._act_adr[j - 1] = a
                for k, axis in enumerate("xyz"):
                    if mj.mj_name2id(m, mj.mjtObj.mjOBJ_ACTUATOR, f"{name}_{axis}") != a + k:
                        raise RuntimeError(f"actuators of joint {name!r} are not consecutive")
        ids, adr, init = [], [], []
        for obj in dynamic:
            jnt = mj.mj_name2id(m, mj.mjtObj.mjOBJ_JOINT, f"obj{obj.object_id}")
            ids.append(obj.object_id)
            adr.append(int(m.jnt_qposadr[jnt]))
            init.append([*obj.position, *_wxyz(obj.quat_xyzw())])
        self._dynamic_id_set = frozenset(ids)
        self._dynamic_qpos_adr = np.array(adr, dtype=np.int64)
        self._dynamic_init = np.array(init, dtype=np.float64).reshape(-1, 7)
        return tuple(ids)

    def _tune_drives(self) -> None:
        """Damping and stiffness of every joint from its torque cap; the stiffness is
        limited by the joint's effective inertia at rest (diagonal of the mass matrix,
        armature included) so that the explicit spring stays stable next to the implicit
        damping: ``kp * h^2 / I <= 2 + h * d / I`` (half the stability bound of this
        semi-implicit scheme)."""
        mj, m, d = self._mj, self._model, self._data
        mj.mj_resetData(m, d)
        d.qpos[self._qpos_adr[0] : self._qpos_adr[0] + 3] = (0.0, 0.0, 0.0)
        mj.mj_forward(m, d)
        full = np.zeros((m.nv, m.nv))
        mj.mj_fullM(m, d, full)
        h = SUBSTEP_S
        for i in range(self.body.num_links - 1):
            d0 = int(self._dof_adr[i + 1])
            if d0 < 0:  # a welded (held) link
                continue
            inertia = float(np.min(np.diag(full)[d0 : d0 + 3]))
            cap = float(self.max_torque_nm[i])
            damping = cap / _DAMPING_CAP_VELOCITY_RAD_S
            stiffness = min(
                cap / _STIFFNESS_CAP_ERROR_RAD, (2.0 + h * damping / inertia) * inertia / h**2
            )
            self._stiffness[i] = stiffness
            self._damping[i] = damping
            m.dof_damping[d0 : d0 + 3] = damping
            a0 = int(self._act_adr[i])
            for k in range(3):
                m.actuator_gainprm[a0 + k, 0] = stiffness
                m.actuator_biasprm[a0 + k, 1] = -stiffness
        mj.mj_resetData(m, d)

    def _close_engine(self) -> None:
        """Release the model and data. Idempotent."""
        self._model = None
        self._data = None
        self._probe = None

    # ================================================================== helpers
    def _ensure_kinematics(self) -> None:
        if not self._kinematics_current:
            self._mj.mj_kinematics(self._model, self._data)
            self._kinematics_current = True

    def _resets(self) -> int:
        """How often MuJoCo reset the data after a bad position, velocity or acceleration."""
        counts = self._data.warning.number
        return int(sum(int(counts[k]) for k in self._reset_warnings))

    def _read_state(self) -> RealizedState:
        ok = drive.read_state(self._data.qpos, self._qpos_adr, self._state_pos, self._state_rot)
        if not ok or self._resets() != self._resets_seen:
            self._diverged()
        return RealizedState(self._state_pos, self._state_rot)

    def _diverged(self) -> None:
        """The engine lost the episode: the base refuses to go on until the next reset."""
        self._resets_seen = self._resets()
        self._end_episode()
        raise RuntimeError(
            "mujoco simulation diverged: the humanoid state is not finite or MuJoCo "
            "reset the data after a bad position, velocity or acceleration (e.g. a deep "
            "initial overlap)"
        )

    # ================================================================== episode
    def _reset_engine(self, frame: np.ndarray) -> RealizedState:
        """Reset the data, put the dynamic objects back and place the humanoid exactly at
        ``frame`` at rest; clear the drives."""
        mj, m, d = self._mj, self._model, self._data
        mj.mj_resetData(m, d)
        self._resets_seen = 0
        for row, adr in enumerate(self._dynamic_qpos_adr):
            d.qpos[adr : adr + 7] = self._dynamic_init[row]
        drive.set_pose(frame, d.qpos, self._qpos_adr, self._prev_gen_rot, self._drive_map)
        self._prev_xz[:] = frame[[0, 2]]
        self._prev_y[0] = frame[1]
        self._pjsc_command[:] = self._prev_gen_rot[1:]
        self._frames_since_reset[0] = 0
        self._kinematics_current = False
        return self._read_state()

    def _step_engine(self, frame: np.ndarray) -> RealizedState:
        return self._run(frame[None, :])

    def _step_engine_frames(self, rows: list[np.ndarray]) -> RealizedState:
        """The frames in one compiled call that does not hold the GIL, so other Python
        threads run meanwhile (the batched vector env's sub-envs; see
        :func:`humanclaw_gym.physics._mujoco_drive.frame_runner`): the base's
        :meth:`~humanclaw_gym.physics.base.HalfPhysicsBase.step_frames`."""
        return self._run(np.stack(rows))

    def _record_engine(self, rows: list[np.ndarray], contacts: bool, parts: bool) -> RecordedFrames:
        """The frames in one compiled call (as :meth:`_step_engine_frames`), which copies
        each frame's ``qpos`` and realized state as it goes; the object poses and contacts
        of every frame are then read from those copies (the contact queries run in a second
        ``MjData``, as :meth:`contacts` does)."""
        n, links = len(rows), self.body.num_links
        record = (np.empty((n, self._model.nq)), np.empty((n, 3)), np.empty((n, links, 4)))
        error: Exception | None = None
        done = n
        if rows:
            try:
                self._run(np.stack(rows), record)
            except Exception as exc:  # the frames before it stand; the caller re-raises
                error = exc
                done = self._recorded
        qpos, pos, rot = (array[:done] for array in record)
        return RecordedFrames(
            pos,
            rot,
            self._object_poses_of(qpos),
            self._contacts_of(qpos, parts) if contacts else None,
            error,
        )

    def _run(
        self, frames: np.ndarray, record: tuple[np.ndarray, ...] | None = None
    ) -> RealizedState:
        """Drives, substeps and state read of every row of ``frames`` (checked); returns the
        realized state after the last. With ``record`` (``qpos (n, nq)``, ``real_pos (n, 3)``,
        ``real_rot (n, L, 4)``) the state after each frame is copied into its row, and
        ``self._recorded`` counts the rows."""
        m, d = self._model, self._data
        self._kinematics_current = False
        self._recorded = 0
        runner = drive.frame_runner() if self._compiled_frames else None
        # A fatal MuJoCo error (e.g. its arena exhausted) becomes a Python exception only in
        # calls made through the bindings; the compiled runner calls the library directly,
        # so a simulation that has used half of its arena steps through the bindings from
        # then on (the shipped scenes stay far below).
        if runner is not None and d.maxuse_arena <= d.narena // 2:
            done = runner(
                m._address,
                d._address,
                frames,
                d.ctrl,
                d.qpos,
                self._qpos_adr,
                self._state_pos,
                d.warning.number,
                self._reset_warnings,
                *(self._no_record if record is None else record),
                *self._drive_args(),
            )
            if record is not None:
                self._recorded = done
            if done != len(frames):
                self._diverged()
            return RealizedState(self._state_pos, self._state_rot)
        for i, frame in enumerate(frames):
            self._python_frame(frame)
            if record is not None:
                record[0][i] = d.qpos
                record[1][i] = self._state_pos
                record[2][i] = self._state_rot
                self._recorded = i + 1
        return RealizedState(self._state_pos, self._state_rot)

    def _drive_args(self) -> tuple[Any, ...]:
        """:func:`~humanclaw_gym.physics._mujoco_drive.begin_frame`'s arguments after the
        frame: the drive state, the tuning and the MjData arrays it writes."""
        d = self._data
        return (
            self._prev_xz,
            self._prev_y,
            self._drive_map,
            self._prev_gen_rot,
            self._state_rot,
            self._pjsc_command,
            self.pjsc_gains,
            self.root_correction_gain,
            MAX_DRIVE_PER_FRAME_RAD,
            FRAME_RATE_HZ,
            d.qvel,
            d.qfrc_applied,
            self._ctrl_sched,
            self._dof_adr,
            self._act_adr,
            self._damping,
            self.max_torque_nm,
            1 if self.target_ramp else 0,
            self._v_root,
            _GRAVITY_MODE_CODES[self.root_gravity_mode],
            GRAVITY_M_S2 * self.root_gravity_scale,
            1 if self.inherit_downward_root_y_velocity else 0,
            SUBSTEP_S,
            self._frames_since_reset,
            FRAMES_PER_CHUNK if self.release_arithmetic else 0,
        )

    def _python_frame(self, frame: np.ndarray) -> None:
        """One frame through the bindings: the drive maths (compiled when numba is there),
        then ``mj_step`` per substep from Python."""
        mj, m, d = self._mj, self._model, self._data
        drive.begin_frame(frame, *self._drive_args())
        root = int(self._dof_adr[0])
        sched = self._ctrl_sched
        if self.root_gravity_mode is not None:
            mode = self.root_gravity_mode
            bias = GRAVITY_M_S2 * self.root_gravity_scale * SUBSTEP_S
            for sub in range(SUBSTEPS_PER_FRAME):
                if sub in ROOT_VELOCITY_SUBSTEPS and sub != 0:
                    d.qvel[root] = self._v_root[0]
                    d.qvel[root + 2] = self._v_root[1]
                d.ctrl[:] = sched[sub] if self.target_ramp else sched[0]
                if mode == "midpoint":
                    d.qvel[root + 1] -= 0.5 * bias
                elif mode == "substep":
                    d.qvel[root + 1] -= bias
                mj.mj_step(m, d)
                if mode == "midpoint":
                    d.qvel[root + 1] -= 0.5 * bias
        elif self.target_ramp:
            for sub in range(SUBSTEPS_PER_FRAME):
                if sub in ROOT_VELOCITY_SUBSTEPS and sub != 0:
                    d.qvel[root] = self._v_root[0]
                    d.qvel[root + 2] = self._v_root[1]
                d.ctrl[:] = sched[sub]
                mj.mj_step(m, d)
        else:
            d.ctrl[:] = sched[0]
            mj.mj_step(m, d, 2)
            d.qvel[root] = self._v_root[0]
            d.qvel[root + 2] = self._v_root[1]
            mj.mj_step(m, d, 2)
        self._read_state()

    # ================================================================== readouts
    def link_poses(self) -> np.ndarray:
        """World pose ``[x, y, z, qx, qy, qz, qw]`` of every link frame (= joint frame),
        rows in ``body.names`` order, ``float64 (L, 7)``."""
        self._require_episode("link_poses")
        self._ensure_kinematics()
        d = self._data
        out = np.empty((self.body.num_links, 7))
        out[:, 0:3] = d.xpos[self._body_ids]
        q = d.xquat[self._body_ids]
        out[:, 3:6] = q[:, 1:4]
        out[:, 6] = q[:, 0]
        return out

    def object_poses(self) -> np.ndarray:
        """World pose of every dynamic object's frame (not its centre of mass), ``(M, 7)``."""
        self._require_built("object_poses")
        return self._object_poses_of(self._data.qpos[None])[0]

    def _object_poses_of(self, qpos: np.ndarray) -> np.ndarray:
        """``(k, M, 7)`` dynamic object poses of ``k`` states' ``qpos (k, nq)``."""
        out = np.empty((len(qpos), len(self._dynamic_ids), 7))
        for i, state in enumerate(qpos):
            for row, adr in enumerate(self._dynamic_qpos_adr):
                q = state[adr : adr + 7]
                out[i, row, 0:3] = q[0:3]
                n = math.sqrt(float(q[3] ** 2 + q[4] ** 2 + q[5] ** 2 + q[6] ** 2))
                out[i, row, 3:6] = q[4:7] / n
                out[i, row, 6] = q[3] / n
        return out

    def contacts(self, parts: bool = True) -> np.ndarray:
        """Contact points of the current state (:data:`CONTACT_DTYPE` rows), computed on call.

        Returned: every humanoid-vs-object point (``a = HUMAN_ID``, ``link_a`` = skeleton
        joint index), every dynamic-vs-dynamic and dynamic-vs-static point (object rows with
        ``a < b``). With ``parts`` the ``link`` fields of objects are the exact part index of
        the colliding geom (else -1).

        Collision detection runs on the current (realized) state: pairs closer than
        :data:`CONTACT_MARGIN_M` are reported, so ``distance`` may be slightly positive (a
        near contact, as pybullet's manifold points); consumers needing touching contacts
        filter ``distance <= 0``. Right after :meth:`reset` these are the contacts of the
        placed pose (the initial-penetration check). The query never changes the
        simulation: it runs in a second ``MjData`` holding the same positions (every step
        runs its own collision pass anyway).
        """
        self._require_episode("contacts")
        return self._contacts_of(self._data.qpos[None], parts)[0]

    def _contacts_of(self, qpos: np.ndarray, parts: bool) -> list[np.ndarray]:
        """The contact rows of each of ``k`` states' ``qpos (k, nq)``: kinematics and
        collision of each in the probe ``MjData`` (with the report margin), the rows of all
        of them made at once (elementwise: the same bits as one by one)."""
        mj, m = self._mj, self._model
        if self._probe is None:
            self._probe = mj.MjData(m)
        probe = self._probe
        counts: list[int] = []
        fields: list[tuple[np.ndarray, ...]] = []
        # report near contacts too: the margin applies to these queries only (each substep
        # runs its own collision pass with the model's zero margin)
        margins = m.geom_margin.copy()
        m.geom_margin[:] = CONTACT_MARGIN_M
        try:
            for state in qpos:
                probe.qpos[:] = state
                mj.mj_kinematics(m, probe)
                mj.mj_collision(m, probe)
                n = int(probe.ncon)
                counts.append(n)
                if n:
                    con = probe.contact
                    fields.append(
                        (
                            con.geom1[:n].copy(),
                            con.geom2[:n].copy(),
                            np.array(con.dist[:n], dtype=np.float64),
                            np.array(con.pos[:n], dtype=np.float64),
                            np.array(con.frame[:n, 0:3], dtype=np.float64),  # geom1 -> geom2
                        )
                    )
        finally:
            m.geom_margin[:] = margins
        if not fields:
            return [empty_contacts() for _ in counts]
        g1, g2, dist, pos, normal = (np.concatenate(f) for f in zip(*fields, strict=True))
        state = np.repeat(np.arange(len(counts)), counts)
        on1 = pos - 0.5 * dist[:, None] * normal
        on2 = pos + 0.5 * dist[:, None] * normal
        owner, part = self._geom_owner, self._geom_part
        o1, o2 = owner[g1], owner[g2]
        swap = (o2 == HUMAN_ID) | ((o1 != HUMAN_ID) & (o1 > o2))
        a = np.where(swap, o2, o1)
        b = np.where(swap, o1, o2)
        dyn = np.fromiter(self._dynamic_id_set, dtype=np.int64, count=len(self._dynamic_id_set))
        keep = (a == HUMAN_ID) & (b != HUMAN_ID)
        keep |= (a != HUMAN_ID) & (np.isin(a, dyn) | np.isin(b, dyn))
        keep &= dist <= CONTACT_MARGIN_M  # box-box manifolds may hold points a bit farther
        out = np.zeros(int(keep.sum()), dtype=CONTACT_DTYPE)
        out["a"], out["b"] = a[keep], b[keep]
        p1, p2 = part[g1], part[g2]
        link_a = np.where(swap, p2, p1)[keep]
        if parts:
            out["link_a"], out["link_b"] = link_a, np.where(swap, p1, p2)[keep]
        else:  # the humanoid's links only
            out["link_a"] = np.where(out["a"] == HUMAN_ID, link_a, -1)
            out["link_b"] = -1
        out["pos_a"] = np.where(swap[:, None], on2, on1)[keep]
        out["pos_b"] = np.where(swap[:, None], on1, on2)[keep]
        out["distance"] = dist[keep]
        ends = np.cumsum(np.bincount(state[keep], minlength=len(counts)))
        return [out[start:end] for start, end in zip((0, *ends[:-1]), ends, strict=True)]

    def _ray_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        """``mj_ray`` against geom group 0 (the scene)."""
        mj, m, d = self._mj, self._model, self._data
        self._ensure_kinematics()
        geom = np.array([-1], dtype=np.int32)
        origin = np.array([x, from_y, z])
        dist = mj.mj_ray(m, d, origin, np.array([0.0, -1.0, 0.0]), self._ray_groups, 1, -1, geom)
        if dist < 0.0 or dist > from_y - to_y:
            return None
        return float(from_y - dist)

    # ================================================================== snapshots
    def _snapshot(self) -> _Snapshot:
        """MuJoCo's integration state (time, positions, velocities, actuation, applied
        forces, warm start) and the drive state."""
        mj, m, d = self._mj, self._model, self._data
        spec = mj.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mj.mj_stateSize(m, spec))
        mj.mj_getState(m, d, state, spec)
        return _Snapshot(
            owner=id(self),
            episode=self._episode,
            physics=state,
            prev_xz=self._prev_xz.copy(),
            prev_y=self._prev_y.copy(),
            prev_rot=self._prev_gen_rot.copy(),
            command=self._pjsc_command.copy(),
            frame_index=int(self._frames_since_reset[0]),
        )

    def _snapshot_live(self, state: Any) -> bool:
        return isinstance(state, _Snapshot)

    def _restore(self, state: _Snapshot) -> RealizedState:
        mj, m, d = self._mj, self._model, self._data
        mj.mj_setState(m, d, state.physics, mj.mjtState.mjSTATE_INTEGRATION)
        self._prev_xz[:] = state.prev_xz
        self._prev_y[:] = state.prev_y
        self._prev_gen_rot[:] = state.prev_rot
        self._pjsc_command[:] = state.command
        self._frames_since_reset[0] = state.frame_index
        self._kinematics_current = False
        self._resets_seen = self._resets()
        return self._read_state()
