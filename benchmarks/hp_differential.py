"""Per-frame differential: the reference release's half-physics functions beside ours.

    python benchmarks/hp_differential.py --release PATH [--out docs/results/hp_differential.json]

``PATH`` is a checkout of the reference release. Its half-physics code imports ``magnum``
and ``habitat_sim`` (not installable here); this harness puts stand-in modules under those
names into ``sys.modules`` (built below: numpy-backed ``Vector3`` / ``Matrix4`` /
``Quaternion`` / ``Rad`` and the two ``habitat_sim.physics`` names the code uses) and then
imports, unchanged, from the checkout:

* ``humanclaw_bench.envs.half_physics_env``: ``HalfPhysicsEnv`` (its ``reset``: the spawn;
  its ``step``: the Y-up-to-Z-up conversion with the neck/head zeroing, the per-frame
  translation rule, one ``hp_step`` per frame) and ``xb75_yup_to_half_physics_pose``;
* ``src/humanclaw_bench/envs/half_physics/hp.py`` (by path, as the environment loads it):
  ``hp_step`` and its helpers.

The environment runs against a recording stand-in for the simulator and the articulated
agent over a small kinematic engine (:class:`Engine`); this package's pybullet backend runs,
unchanged, against a stand-in ``pybullet`` client over an identical engine, and the MuJoCo
backend's frame-by-frame path against a stand-in ``mujoco`` / ``MjData`` over another. Both
sides start every chunk from the same random realized state; the engine records what it was
commanded when each substep ran (root linear and angular velocity, joint velocities, joint
motor targets and gains) and the state after the frame, so the two sides' commands are
compared substep by substep for the same frames and states. The engine's own dynamics
(velocities decaying like contact friction, a Bullet-style spherical motor) only make the
realized state differ from the commands; both sides see the same.

Chunks: every skill of the eight (this package's procedural motion, random parameters,
random start poses), a few chunks each, with random realized states (root offset and tilt,
joint deviations, velocities including a downward root velocity); both bodies: the built-in
skeleton and the release's ``neutral_beta0_handmerged``. The spawn is compared on the
release's body from its seed state placed at random ``init_offset`` / ``init_yaw``.

Not imported but re-derived here (named in the result): the skeleton's SMPL-X link map for
the release's environment (its ``make_smplx_and_urdf_mappings`` accepts only SMPL-X link
names; the skeleton's two hand links take a joint the release's conversion leaves at zero).

Written: ``docs/results/hp_differential.json`` (schema ``humanclaw_hp_differential_v1``):
``bodies.<body>.<backend>.<release_arithmetic | ours_arithmetic>`` (the release's
arithmetic, and this package's for contrast): the largest
difference of every compared quantity over all frames, the tolerance it is held to, the
frame and substep counts, and ``ok``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import platform
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from humanclaw_gym.fileio import write_json_atomic
from humanclaw_gym.rotations import (
    matrix_from_rotvec,
    quat_conj,
    quat_exp,
    quat_log,
    quat_mul,
    quat_rotate,
    rotvec_from_matrix,
)

SCHEMA = "humanclaw_hp_differential_v1"
_HANDMERGED = "neutral_beta0_handmerged"
_SUBSTEP_S = 1.0 / 120.0
#: Error reduction of the engine's spherical motor per substep (pybullet's default).
_MOTOR_ERP = 0.2
#: How the engine's velocities decay per substep (stands for contacts and friction).
_DECAY_LINEAR = np.array([0.97, 0.9, 0.97])
_DECAY_ANGULAR = 0.99
#: Tolerances: linear m/s, angular rad/s, motor targets rad, gains exact. The release
#: rounds its Z-up root orientation to float32 before turning it into Habitat's frame (the
#: root angular velocity differs by that rounding over one frame); its arc-cosine formula for
#: joint arcs loses precision near zero angle (about 1e-8 rad, over 1/30 s).
TOLERANCES = {
    "root_linear_m_s": 1e-9,
    "root_angular_rad_s": 2e-5,
    "joint_velocity_rad_s": 1e-5,
    "motor_target_rad": 1e-7,
    "motor_gain": 0.0,
    "spawn_position_m": 1e-6,
    "spawn_rotation_rad": 1e-6,
}
#: What each backend reproduces with ``release_arithmetic`` (held to the tolerances): MuJoCo
#: keeps its own joint drive (the release's is a Bullet spherical motor).
_HELD = {
    "pybullet": tuple(TOLERANCES),
    "mujoco": ("root_linear_m_s", "root_angular_rad_s", "spawn_position_m", "spawn_rotation_rad"),
}
_SKILLS = (
    ("Walk<forward><{speed}>", {"speed": ("slow", "normal", "fast")}),
    ("Stop/Stand", {}),
    ("Turn<{side}><{deg}>", {"side": ("left", "right"), "deg": (10, 30, 60, 90, 120)}),
    ("Climb upstairs<normal>", {}),
    ("Sit down<{h}>", {"h": (0.3, 0.45, 0.6)}),
    ("Step back<{d}>", {"d": (0.1, 0.25, 0.5)}),
    ("Side step<{side}><{d}>", {"side": ("left", "right"), "d": (0.1, 0.3, 0.5)}),
    ("Walk downstairs<normal>", {}),
)


@dataclass
class Args:
    release: Path
    """a checkout of the reference release"""
    out: Path = Path("docs/results/hp_differential.json")
    """where to write the result"""
    chunks_per_skill: int = 3
    """random chunks per skill, per body"""
    seed: int = 0
    """random stream of the chunks and states"""


# ======================================================================================
# stand-in magnum and habitat_sim (numpy)
# ======================================================================================
class _Vector3(np.ndarray):
    """magnum.Vector3: a float64 3-vector with ``length`` / ``normalized`` / ``x y z``."""

    def __new__(cls, *values: Any) -> _Vector3:
        data = values[0] if len(values) == 1 else values
        return np.asarray(data, dtype=np.float64).reshape(3).copy().view(cls)

    def length(self) -> float:
        return float(np.linalg.norm(np.asarray(self)))

    def normalized(self) -> _Vector3:
        return _Vector3(np.asarray(self) / self.length())

    x = property(lambda self: float(self[0]))
    y = property(lambda self: float(self[1]))
    z = property(lambda self: float(self[2]))


class _Matrix4:
    """magnum.Matrix4: a rigid transform (copy construction, ``from_``, ``@``,
    ``inverted``, ``translation``, ``rotation()``)."""

    def __init__(self, value: Any = None) -> None:
        self.m = np.eye(4) if value is None else np.array(getattr(value, "m", value), float)

    @classmethod
    def from_(cls, rotation: Any, translation: Any) -> _Matrix4:
        out = cls()
        out.m[:3, :3] = np.asarray(rotation, dtype=np.float64).reshape(3, 3)
        out.m[:3, 3] = np.asarray(translation, dtype=np.float64).reshape(3)
        return out

    def __matmul__(self, other: _Matrix4) -> _Matrix4:
        return _Matrix4(self.m @ other.m)

    def inverted(self) -> _Matrix4:
        return _Matrix4(np.linalg.inv(self.m))

    @property
    def translation(self) -> _Vector3:
        return _Vector3(self.m[:3, 3])

    def rotation(self) -> np.ndarray:
        return self.m[:3, :3].copy()


class _Quaternion:
    """magnum.Quaternion: ``((x, y, z), w)`` construction, ``rotation``, ``to_matrix``,
    ``vector`` / ``scalar``."""

    def __init__(self, value: Any = ((0.0, 0.0, 0.0), 1.0)) -> None:
        (x, y, z), w = value
        self.xyzw = np.array([x, y, z, w], dtype=np.float64)

    @classmethod
    def rotation(cls, angle: Any, axis: Any) -> _Quaternion:
        q = quat_exp(np.asarray(axis, dtype=np.float64) * float(angle))
        return cls(((q[0], q[1], q[2]), q[3]))

    def to_matrix(self) -> np.ndarray:
        return matrix_from_rotvec(quat_log(self.xyzw))

    vector = property(lambda self: _Vector3(self.xyzw[:3]))
    scalar = property(lambda self: float(self.xyzw[3]))


def _stand_in_modules() -> dict[str, types.ModuleType]:
    mn = types.ModuleType("magnum")
    mn.Vector3 = _Vector3
    mn.Matrix4 = _Matrix4
    mn.Matrix3 = lambda m: np.asarray(m, dtype=np.float64)
    mn.Quaternion = _Quaternion
    mn.Rad = float
    habitat_sim = types.ModuleType("habitat_sim")
    physics = types.ModuleType("habitat_sim.physics")

    class MotionType:
        KINEMATIC = "KINEMATIC"
        DYNAMIC = "DYNAMIC"

    @dataclass
    class JointMotorSettings:
        spherical_position_target: Any = None
        position_gain: float = 0.0
        spherical_velocity_target: Any = None
        velocity_gain: float = 0.0
        max_impulse: float = 0.0

    physics.MotionType = MotionType
    physics.JointMotorSettings = JointMotorSettings
    habitat_sim.physics = physics
    return {"magnum": mn, "habitat_sim": habitat_sim, "habitat_sim.physics": physics}


def import_release(release: Path) -> tuple[Any, Any]:
    """``(half_physics_env module, hp module)`` from the checkout, with the stand-ins."""
    sys.modules.update(_stand_in_modules())
    src = str(release / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    env_mod = importlib.import_module("humanclaw_bench.envs.half_physics_env")
    hp_path = release / "src/humanclaw_bench/envs/half_physics/hp.py"
    hp = env_mod._load_module_from_path("humanclaw_differential_hp", hp_path)
    return env_mod, hp


# ======================================================================================
# the kinematic engine both sides run on
# ======================================================================================
@dataclass
class Engine:
    """Root (base centre of mass ``com``, rotation ``rot`` xyzw, velocities ``v`` / ``w``,
    world) and ``J`` joints (``q`` xyzw relative to the parent, ``qd`` child frame), spherical
    motors ``{joint: (target xyzw, gain, force)}``; ``c`` the base's centre of mass in its
    link frame. ``step`` records the commands it runs with (see the module docstring)."""

    com: np.ndarray
    rot: np.ndarray
    v: np.ndarray
    w: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    c: np.ndarray
    motors: dict[int, tuple[np.ndarray, float, float]] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)

    def copy(self) -> Engine:
        return Engine(
            self.com.copy(), self.rot.copy(), self.v.copy(), self.w.copy(),
            self.q.copy(), self.qd.copy(), self.c.copy(), {}, [],
        )  # fmt: skip

    @property
    def origin(self) -> np.ndarray:
        return self.com - quat_rotate(self.rot, self.c)

    def set_origin(self, origin: np.ndarray) -> None:
        self.com = np.asarray(origin, dtype=np.float64) + quat_rotate(self.rot, self.c)

    def commands(self, joints: np.ndarray) -> dict[str, Any]:
        motors = [self.motors.get(int(j)) for j in joints]
        return {
            "v": self.v.copy(),
            "w": self.w.copy(),
            "qd": self.qd[joints].copy(),
            "target": np.array([m[0] if m else [0, 0, 0, 1.0] for m in motors], dtype=float),
            "gain": np.array([m[1] if m and m[2] > 0 else 0.0 for m in motors]),
        }

    def step(self, dt: float, joints: np.ndarray) -> None:
        self.log.append(self.commands(joints))
        for j, (target, gain, force) in self.motors.items():
            if force > 0.0:  # a Bullet spherical motor: the velocity that removes erp of the error
                error = quat_log(quat_mul(quat_conj(self.q[j]), target))
                self.qd[j] = gain * _MOTOR_ERP * error / dt
        self.q = quat_mul(self.q, quat_exp(self.qd * dt))
        self.com = self.com + self.v * dt
        self.rot = quat_mul(quat_exp(self.w * dt), self.rot)
        self.v = self.v * _DECAY_LINEAR
        self.w = self.w * _DECAY_ANGULAR

    def state(self, joints: np.ndarray) -> dict[str, Any]:
        return {"origin": self.origin, "rot": self.rot.copy(), "q": self.q[joints].copy()}


# -- the release's side: a recording simulator and articulated agent ---------------------
class _ReleaseAgent:
    """The articulated agent ``hp_step`` and ``HalfPhysicsEnv`` read and write."""

    def __init__(self, engine: Engine, names: tuple[str, ...]) -> None:
        self.e = engine
        self.root = names[0]  # Habitat's link id -1
        self.names = names[1:]  # link names, link id order
        self.num_links = len(self.names)
        self.existing_joint_motor_ids: dict[int, int] = {}
        self.motion_type = None
        self.auto_clamp_joint_limits = True

    # pose
    @property
    def transformation(self) -> _Matrix4:
        return _Matrix4.from_(matrix_from_rotvec(quat_log(self.e.rot)), self.e.origin)

    @property
    def translation(self) -> _Vector3:
        return _Vector3(self.e.origin)

    @translation.setter
    def translation(self, value: Any) -> None:
        self.e.set_origin(np.asarray(value, dtype=np.float64))

    @property
    def rotation(self) -> _Quaternion:
        q = self.e.rot
        return _Quaternion(((q[0], q[1], q[2]), q[3]))

    @rotation.setter
    def rotation(self, value: _Quaternion) -> None:
        origin = self.e.origin
        self.e.rot = np.asarray(value.xyzw, dtype=np.float64)
        self.e.set_origin(origin)

    @property
    def root_linear_velocity(self) -> _Vector3:
        return _Vector3(self.e.v)

    @root_linear_velocity.setter
    def root_linear_velocity(self, value: Any) -> None:
        self.e.v = np.asarray(value, dtype=np.float64).reshape(3).copy()

    @property
    def root_angular_velocity(self) -> _Vector3:
        return _Vector3(self.e.w)

    @root_angular_velocity.setter
    def root_angular_velocity(self, value: Any) -> None:
        self.e.w = np.asarray(value, dtype=np.float64).reshape(3).copy()

    @property
    def joint_positions(self) -> np.ndarray:
        return self.e.q.reshape(-1).copy()

    @joint_positions.setter
    def joint_positions(self, value: Any) -> None:
        self.e.q = np.asarray(value, dtype=np.float64).reshape(-1, 4).copy()

    @property
    def joint_velocities(self) -> np.ndarray:
        return self.e.qd.reshape(-1).copy()

    @joint_velocities.setter
    def joint_velocities(self, value: Any) -> None:
        self.e.qd = np.asarray(value, dtype=np.float64).reshape(-1, 3).copy()

    # names
    def get_link_name(self, link: int) -> str:
        return self.names[link]

    get_link_joint_name = get_link_name

    def get_link_id_from_name(self, name: str) -> int:
        return -1 if name == self.root else self.names.index(name)

    # motors
    def create_joint_motor(self, link: int, settings: Any) -> int:
        motor = len(self.existing_joint_motor_ids) + 1000
        self.existing_joint_motor_ids[motor] = link
        self.update_joint_motor(motor, settings)
        return motor

    def update_joint_motor(self, motor: int, settings: Any) -> None:
        link = self.existing_joint_motor_ids[motor]
        target = np.asarray(settings.spherical_position_target.xyzw, dtype=np.float64)
        self.e.motors[link] = (target, float(settings.position_gain), float(settings.max_impulse))

    def remove_joint_motor(self, motor: int) -> None:
        self.e.motors.pop(self.existing_joint_motor_ids.pop(motor), None)


class _ReleaseSim:
    def __init__(self, engine: Engine, joints: np.ndarray) -> None:
        self.e, self.joints = engine, joints

    def set_gravity(self, gravity: Any) -> None:
        pass

    def step_physics(self, dt: float) -> None:
        self.e.step(float(dt), self.joints)

    def get_rigid_object_manager(self) -> Any:
        return types.SimpleNamespace(get_object_handles=lambda: [])

    def get_sensor_observations(self) -> dict[str, np.ndarray]:
        return {"ego_rgb": np.zeros((2, 2, 3), dtype=np.uint8)}


# -- this package's side: stand-ins for pybullet and MuJoCo ------------------------------
class _FakePybullet:
    """The pybullet calls the backend makes between ``build`` and ``close``, on the engine
    (pybullet link ``i`` = engine joint ``i``)."""

    POSITION_CONTROL = 2

    def __init__(self, engine: Engine, joints: np.ndarray) -> None:
        self.e, self.joints = engine, joints

    def getBasePositionAndOrientation(self, body, physicsClientId=0):  # noqa: N802
        return tuple(self.e.com), tuple(self.e.rot)

    def resetBasePositionAndOrientation(self, body, pos, orn, physicsClientId=0):  # noqa: N802
        self.e.com = np.array(pos, dtype=float)
        self.e.rot = np.array(orn, dtype=float)

    def getBaseVelocity(self, body, physicsClientId=0):  # noqa: N802
        return tuple(self.e.v), tuple(self.e.w)

    def resetBaseVelocity(self, body, lin, ang, physicsClientId=0):  # noqa: N802
        self.e.v = np.array(lin, dtype=float)
        self.e.w = np.array(ang, dtype=float)

    def getJointStatesMultiDof(self, body, links, physicsClientId=0):  # noqa: N802
        return [(tuple(self.e.q[j]), tuple(self.e.qd[j]), (), ()) for j in links]

    def resetJointStatesMultiDof(self, body, links, positions, targetVelocities, physicsClientId=0):  # noqa: N802
        for j, p, v in zip(links, positions, targetVelocities, strict=True):
            self.e.q[j] = p
            self.e.qd[j] = v

    def setJointMotorControlMultiDofArray(  # noqa: N802
        self, body, links, mode, targetPositions, positionGains, forces,
        velocityGains=None, physicsClientId=0,
    ):  # fmt: skip
        for j, t, g, f in zip(links, targetPositions, positionGains, forces, strict=True):
            self.e.motors[j] = (np.array(t, dtype=float), float(g), float(f[0]))

    def stepSimulation(self, physicsClientId=0):  # noqa: N802
        self.e.step(_SUBSTEP_S, self.joints)


class _FakeMjData:
    """An ``MjData`` whose ``qpos`` / ``qvel`` mirror the engine around each step."""

    def __init__(self, real: Any) -> None:
        self.qpos = np.array(real.qpos, dtype=float)
        self.qvel = np.array(real.qvel, dtype=float)
        self.ctrl = np.array(real.ctrl, dtype=float)
        self.qfrc_applied = np.array(real.qfrc_applied, dtype=float)
        self.warning = types.SimpleNamespace(number=np.zeros(32, dtype=np.int64))


class _FakeMujoco:
    """``mj_step`` on the engine: the free joint's origin velocity and body-frame angular
    velocity, and each ball joint's child-frame velocity, copied in; positions out."""

    def __init__(self, engine: Engine, backend: Any, joints: np.ndarray) -> None:
        self.e, self.b, self.joints = engine, backend, joints

    def mj_resetData(self, m: Any, d: _FakeMjData) -> None:  # noqa: N802
        d.qvel[:] = 0.0

    def sync_out(self, d: _FakeMjData) -> None:
        b, e = self.b, self.e
        a, r = b._qpos_adr[0], b._dof_adr[0]
        d.qpos[a : a + 3] = e.origin
        d.qpos[a + 3 : a + 7] = [e.rot[3], *e.rot[:3]]
        lever = quat_rotate(e.rot, e.c)
        d.qvel[r : r + 3] = e.v - np.cross(e.w, lever)  # the origin's velocity
        d.qvel[r + 3 : r + 6] = quat_rotate(quat_conj(e.rot), e.w)
        for j in self.joints:
            a, r = b._qpos_adr[j + 1], b._dof_adr[j + 1]
            d.qpos[a : a + 4] = [e.q[j][3], *e.q[j][:3]]
            d.qvel[r : r + 3] = e.qd[j]

    def mj_step(self, m: Any, d: _FakeMjData) -> None:
        b, e = self.b, self.e
        r = b._dof_adr[0]
        e.w = quat_rotate(e.rot, d.qvel[r + 3 : r + 6])
        e.v = d.qvel[r : r + 3] + np.cross(e.w, quat_rotate(e.rot, e.c))
        for j in self.joints:
            r = b._dof_adr[j + 1]
            e.qd[j] = d.qvel[r : r + 3]
        e.step(_SUBSTEP_S, self.joints)
        self.sync_out(d)


# ======================================================================================
# bodies, chunks, states
# ======================================================================================
@dataclass
class Body:
    name: str
    names: tuple[str, ...]  # link names, the root first
    driven: np.ndarray  # engine joint indices (link - 1) the frame drives
    com_local: np.ndarray  # the base's centre of mass, link frame
    asset: Any  # BodyAsset or None
    smplx2urdf: list[int]  # the release's SMPL-X joint -> link map for its environment


def _bodies(release: Path) -> list[Body]:
    from humanclaw_gym.body.asset import load_body_asset
    from humanclaw_gym.body.model import skeleton_body
    from humanclaw_gym.body.skeleton import JOINT_NAMES

    out = []
    skeleton = skeleton_body()
    smplx = _smplx_names(release)
    # the release's env maps SMPL-X joints onto link ids; the skeleton's hands are not
    # SMPL-X joints: they take the jaw's row, which its conversion leaves at zero (re-derived)
    jaw = smplx.index("jaw") - 1
    sk_map = [smplx[1:].index(n) if n in smplx else jaw for n in JOINT_NAMES[1:]]
    out.append(
        Body(
            "builtin_skeleton",
            tuple(JOINT_NAMES),
            np.arange(len(JOINT_NAMES) - 1),
            np.asarray(skeleton.shapes[0].offset_m, dtype=float),
            None,
            sk_map,
        )
    )
    asset = load_body_asset(release / "resources/agent" / _HANDMERGED)
    drive = asset.body_model().drive_map
    out.append(
        Body(
            _HANDMERGED,
            tuple(asset.links),
            np.flatnonzero(drive[1:] >= 0),
            np.asarray(asset.inertial_origins_m[0], dtype=float),
            asset,
            [],  # the release's own mapping (make_smplx_and_urdf_mappings)
        )
    )
    return out


def _smplx_names(release: Path) -> list[str]:
    _, hp = import_release(release)
    return list(hp.SMPLX_JOINT_NAMES)


def _chunks(rng: np.random.Generator, per_skill: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(skill text, previous frame, 15 frames)`` in this package's world and layout."""
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.skills import SkillCall

    out = []
    for template, params in _SKILLS:
        for _ in range(per_skill):
            text = template.format(**{k: rng.choice(v) for k, v in params.items()})
            motion = ProceduralMotionGenerator()
            start = np.array([rng.uniform(-8, 8), 0.0, rng.uniform(-8, 8)])
            yaw = float(rng.uniform(-math.pi, math.pi))
            prev = motion.reset(start, yaw, seed=int(rng.integers(1 << 30)))[-1]
            if rng.integers(0, 2):  # sometimes from a moving body
                prev = motion.generate(SkillCall.parse("Walk<forward><normal>"))[-1]
            if text == "Stop/Stand":  # no procedural chunk: the last pose held, joints moving
                frames = np.tile(prev, (15, 1))
                frames[:, 6:] += np.cumsum(rng.normal(0.0, 0.01, (15, 69)), axis=0)
            else:
                frames = motion.generate(SkillCall.parse(text))
            out.append((text, prev.copy(), np.asarray(frames, dtype=np.float64).copy()))
    return out


#: The release's motion world from ours (its inverse is the same half turn).
_H = np.diag([-1.0, 1.0, -1.0])
#: Any fixed SMPL pelvis offset: only differences of the translation drive the root.
_PELVIS = np.array([-0.0018, -0.2233, 0.0282])


def _to_release(frames: np.ndarray) -> np.ndarray:
    """Our frames -> the release's Y-up 75-D xb (its motion world, SMPL translation), float32."""
    xb = np.empty_like(frames)
    xb[:, :3] = (frames[:, :3] - _PELVIS) @ _H.T
    xb[:, 3:6] = rotvec_from_matrix(_H @ matrix_from_rotvec(frames[:, 3:6]))
    xb[:, 6:] = frames[:, 6:]
    return xb.astype(np.float32)


def _to_ours(xb: np.ndarray) -> np.ndarray:
    """The release's xb -> our frames (float64 of the same float32 numbers)."""
    xb = np.asarray(xb, dtype=np.float64)
    out = np.empty_like(xb)
    out[:, :3] = xb[:, :3] @ _H.T + _PELVIS
    out[:, 3:6] = rotvec_from_matrix(_H @ matrix_from_rotvec(xb[:, 3:6]))
    out[:, 6:] = xb[:, 6:]
    return out


def _random_state(rng: np.random.Generator, body: Body, prev: np.ndarray) -> Engine:
    """A realized state near the previous frame: root offset and tilt, joint deviations,
    velocities (a downward root velocity among them)."""
    from humanclaw_gym.body.skeleton import JOINT_INDEX

    links = len(body.names)
    q = np.tile([0.0, 0.0, 0.0, 1.0], (links - 1, 1))
    for j in body.driven:
        name = body.names[j + 1]
        k = JOINT_INDEX[name]
        gen = quat_exp(prev[3 + 3 * k : 6 + 3 * k])
        q[j] = quat_mul(gen, quat_exp(rng.normal(0.0, 0.15, 3)))
    rot = quat_mul(quat_exp(rng.normal(0.0, 0.05, 3)), quat_exp(prev[3:6]))
    origin = prev[0:3] + rng.normal(0.0, 0.03, 3)
    engine = Engine(
        com=np.zeros(3),
        rot=rot,
        v=np.array([rng.normal(0, 0.3), -abs(rng.normal(0, 0.4)), rng.normal(0, 0.3)]),
        w=rng.normal(0.0, 0.3, 3),
        q=q,
        qd=rng.normal(0.0, 0.5, (links - 1, 3)),
        c=body.com_local.copy(),
    )
    engine.set_origin(origin)
    return engine


# ======================================================================================
# the two sides
# ======================================================================================
def _release_config(release: Path) -> dict[str, Any]:
    config = json.loads((release / "configs/paper_fullval_v1.json").read_text())
    return config["physics"]


class ReleaseSide:
    """``HalfPhysicsEnv`` of the checkout on the recording stand-ins."""

    def __init__(self, release: Path, body: Body) -> None:
        from scipy.spatial.transform import Rotation

        env_mod, hp = import_release(release)
        physics = _release_config(release)
        urdf = (
            body.asset.urdf_path
            if body.asset is not None
            else release / "resources/agent" / _HANDMERGED / f"{_HANDMERGED}.urdf"
        )
        env = env_mod.HalfPhysicsEnv(
            agent_urdf=urdf,
            build_runtime=False,
            root_gravity_scale=physics["root_gravity_scale"],
            root_gravity_mode=physics["root_gravity_mode"],
            inherit_downward_root_y_velocity=physics["inherit_downward_root_y_velocity"],
            pjsc_lambda=physics["pjsc_lambda"],
            pjsc_lambda_by_link=physics["pjsc_lambda_by_link"],
            pjsc_substeps=physics["pjsc_substeps"],
            root_linear_xz_command_substeps=physics["root_linear_xz_command_substeps"],
            friction=physics["friction"],
        )
        env._runtime = env_mod.RuntimeModules(
            habitat_sim=sys.modules["habitat_sim"],
            mn=sys.modules["magnum"],
            rotation_cls=Rotation,
            motion_type=sys.modules["habitat_sim.physics"].MotionType,
            hp=hp,
        )
        env.world_transformation = Rotation.from_matrix(
            np.array([[-1, 0, 0], [0, 0, 1], [0, 1, 0]], dtype=float)
        )
        env.world_transformation_mn = _Matrix4.from_(
            env.world_transformation.as_matrix(), np.zeros(3)
        )
        env._update_cameras = lambda: None
        self.env, self.body, self.env_mod = env, body, env_mod

    def attach(self, engine: Engine) -> None:
        agent = _ReleaseAgent(engine, self.body.names)
        self.env.agent = agent
        self.env.sim = _ReleaseSim(engine, self.body.driven)
        if self.body.asset is not None:
            shift = np.load(self.body.asset.path / "shift.npy")
            self.env.original_root_shift = shift[0]
            with contextlib.redirect_stdout(io.StringIO()):
                self.env.smplx2urdf, self.env.urdf2smplx = (
                    self.env._runtime.hp.make_smplx_and_urdf_mappings(agent)
                )
        else:
            self.env.original_root_shift = np.zeros(3)
            self.env.smplx2urdf = self.body.smplx2urdf
            # its trajectory readback assumes 54 joints; it records, it commands nothing
            self.env._read_agent_state = lambda: (np.zeros(3), np.zeros(3), np.zeros((54, 3)))

    def spawn(self, release_start: np.ndarray) -> None:
        transl, orient, pose = self.env_mod.xb75_yup_to_half_physics_pose(release_start)
        self.env.reset(initial_transl=transl, initial_global_orient=orient, initial_body_pose=pose)

    def chunk(self, xb: np.ndarray) -> None:
        self.env._reset = True
        with contextlib.redirect_stdout(io.StringIO()):  # its one-time configuration report
            self.env.step(xb)


class OurSide:
    """A physics backend of this package on the engine stand-ins."""

    def __init__(self, backend: str, body: Body, release: Path, release_arithmetic: bool) -> None:
        from humanclaw_gym.backends import registry
        from humanclaw_gym.profiles import paper_physics

        _, options = paper_physics(release, release_arithmetic=release_arithmetic)
        if body.asset is not None:
            options["body_asset"] = str(body.asset.path)
        else:  # the skeleton's links: the same gains by name
            options["pjsc_gains"] = dict(options["pjsc_gains"])
        options.pop("root_friction", None)
        cls = registry.entry("physics", backend).load()
        self.backend = cls(**options)
        self.kind, self.body = backend, body
        from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec

        floor = SceneObject(
            1, "floor", "floor", (0.0, -50.0, 0.0), 0.0, (Part("box", (1, 0.05, 1)),)
        )
        self.void = SceneSpec("void", (Room(0, "hallway", (-1, -1), (1, 1)),), (floor,))
        if backend == "mujoco":  # the real model for the indices, the data a stand-in
            self.backend.build(self.void)
            self.backend._compiled_frames = False

    def attach(self, engine: Engine) -> None:
        b = self.backend
        if self.kind == "pybullet":  # built on the stand-in: the base's scene is the void
            b._p = _FakePybullet(engine, self.body.driven)
            b._client, b._human, b._pristine = 0, 0, True
            b._scene = self.void
            b._base_com_local = engine.c.copy()
            b._dynamic_bodies, b._dynamic_weight = [], np.zeros(0)
        else:
            b._data = _FakeMjData(b._data)
            b._mj = _FakeMujoco(engine, b, self.body.driven)
            b._resets_seen = 0
            b._reset_warnings = np.zeros(0, dtype=np.int64)
            b._mj.sync_out(b._data)
        b._episode_ready = True
        self.engine = engine

    def spawn(self, frame: np.ndarray) -> None:
        b = self.backend
        b.reset(frame)
        if self.kind == "mujoco":  # the placed qpos into the engine
            a = b._qpos_adr[0]
            self.engine.rot = np.array([*b._data.qpos[a + 4 : a + 7], b._data.qpos[a + 3]])
            self.engine.set_origin(b._data.qpos[a : a + 3])
            for j in self.body.driven:
                a = b._qpos_adr[j + 1]
                self.engine.q[j] = [*b._data.qpos[a + 1 : a + 4], b._data.qpos[a]]

    def chunk(self, prev: np.ndarray, frames: np.ndarray) -> None:
        b = self.backend
        gen_prev = b._physics_input(prev)
        if self.kind == "pybullet":  # the chunk starts: the backend's drive state
            b._frames_since_reset = 0
            b._prev_gen = gen_prev.copy()
            b._prev_gen_rot = b.frame_link_rotations(gen_prev)
            b._pjsc_command = b._prev_gen_rot[1:].copy()
        else:
            b._frames_since_reset[0] = 0
            b._prev_gen_rot[:] = b.frame_link_rotations(gen_prev)
            b._prev_xz[:] = gen_prev[[0, 2]]
            b._prev_y[0] = gen_prev[1]
            b._pjsc_command[:] = b._prev_gen_rot[1:]
            b._mj.sync_out(b._data)
        b._take_realized(b._read_state(), "_read_state")  # the engine's state, to the base
        for frame in frames:
            b.step_frame(frame)


# ======================================================================================
# comparison
# ======================================================================================
def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between unit quaternions (either sign), rad."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return np.linalg.norm(quat_log(quat_mul(quat_conj(a), b)), axis=-1)


def _compare_logs(mine: list[dict], theirs: list[dict], worst: dict[str, float]) -> None:
    if len(mine) != len(theirs):
        raise RuntimeError(f"substeps differ: {len(mine)} here, {len(theirs)} in the release")
    for a, b in zip(mine, theirs, strict=True):
        worst["root_linear_m_s"] = max(
            worst["root_linear_m_s"], float(np.abs(a["v"] - b["v"]).max())
        )
        worst["root_angular_rad_s"] = max(
            worst["root_angular_rad_s"], float(np.abs(a["w"] - b["w"]).max())
        )
        worst["joint_velocity_rad_s"] = max(
            worst["joint_velocity_rad_s"], float(np.abs(a["qd"] - b["qd"]).max(initial=0.0))
        )
        worst["motor_target_rad"] = max(
            worst["motor_target_rad"], float(_angle(a["target"], b["target"]).max(initial=0.0))
        )
        worst["motor_gain"] = max(
            worst["motor_gain"], float(np.abs(a["gain"] - b["gain"]).max(initial=0.0))
        )


def _release_start(rng: np.random.Generator, seed_state: np.ndarray) -> np.ndarray:
    """The seed's first frame placed as the release's motion runner places it, at a random
    ``init_offset`` / ``init_yaw`` (float32, its motion world)."""
    from scipy.spatial.transform import Rotation

    offset = np.array([rng.uniform(-10, 10), rng.uniform(-10, 10), rng.uniform(-0.1, 0.5)])
    yaw = rng.uniform(-180.0, 180.0)
    rot = Rotation.from_rotvec([0.0, math.radians(yaw), 0.0]).as_matrix().astype(np.float32)
    t = np.array([offset[0], offset[2], -offset[1]], dtype=np.float32)
    first = seed_state[0, :75].astype(np.float32)
    out = np.empty(75, dtype=np.float32)
    out[:3] = rot @ first[:3] + t
    out[3:6] = Rotation.from_matrix(rot @ Rotation.from_rotvec(first[3:6]).as_matrix()).as_rotvec()
    out[6:] = first[6:75]
    return out


def _run_body(
    args: Args, body: Body, backend: str, release_arithmetic: bool, chunks, seed_state
) -> dict:
    from humanclaw_gym.physics.release import release_spawn_frame

    rng = np.random.default_rng(args.seed + 7)
    release = ReleaseSide(args.release, body)
    ours = OurSide(backend, body, args.release, release_arithmetic)
    worst = dict.fromkeys(TOLERANCES, 0.0)
    frames_run = substeps = 0
    for _text, prev, frames in chunks:
        xb = _to_release(np.vstack([prev[None], frames]))
        ours_frames = _to_ours(xb)
        state = _random_state(rng, body, ours_frames[0])
        theirs_engine, mine_engine = state.copy(), state.copy()
        release.attach(theirs_engine)
        ours.attach(mine_engine)
        release.chunk(xb[1:])
        ours.chunk(ours_frames[0], ours_frames[1:])
        _compare_logs(mine_engine.log, theirs_engine.log, worst)
        frames_run += len(frames)
        substeps += len(mine_engine.log)
    spawns = 0
    if body.asset is not None and release_arithmetic:
        shift0 = np.load(body.asset.path / "shift.npy")[0]
        for _ in range(args.chunks_per_skill * 4):
            start = _release_start(rng, seed_state)
            state = _random_state(rng, body, _to_ours(start[None].astype(np.float64))[0])
            theirs_engine, mine_engine = state.copy(), state.copy()
            release.attach(theirs_engine)
            ours.attach(mine_engine)
            release.spawn(start)
            ours.spawn(release_spawn_frame(start, shift0))
            a, b = mine_engine.state(body.driven), theirs_engine.state(body.driven)
            worst["spawn_position_m"] = max(
                worst["spawn_position_m"], float(np.abs(a["origin"] - b["origin"]).max())
            )
            worst["spawn_rotation_rad"] = max(
                worst["spawn_rotation_rad"],
                float(max(_angle(a["rot"], b["rot"]), _angle(a["q"], b["q"]).max())),
            )
            spawns += 1
    if backend == "mujoco":
        ours.backend.close()
    checked = {k: v for k, v in worst.items() if spawns or not k.startswith("spawn")}
    held = [k for k in checked if release_arithmetic and k in _HELD[backend]]
    return {
        "frames": frames_run,
        "substeps": substeps,
        "spawns": spawns,
        "max_abs_difference": {k: float(f"{v:.3g}") for k, v in checked.items()},
        "held_to_tolerance": held,
        "within_tolerance": {k: bool(checked[k] <= TOLERANCES[k]) for k in held},
        "ok": all(checked[k] <= TOLERANCES[k] for k in held) if held else None,
    }


def _release_commit(release: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(release), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def main(args: Args) -> int:
    import hashlib

    import torch

    release = args.release.expanduser().resolve()
    args.release = release
    rng = np.random.default_rng(args.seed)
    chunks = _chunks(rng, args.chunks_per_skill)
    seed_state = torch.load(
        release / "resources/seeds/natural_beta0_fk_seed.pt", map_location="cpu", weights_only=True
    )
    seed_state = np.asarray(seed_state["state"] if isinstance(seed_state, dict) else seed_state)
    results: dict[str, Any] = {}
    for body in _bodies(release):
        results[body.name] = {}
        for backend in ("pybullet", "mujoco"):
            results[body.name][backend] = {}
            for release_arithmetic in (True, False):
                key = f"{'release' if release_arithmetic else 'ours'}_arithmetic"
                row = _run_body(args, body, backend, release_arithmetic, chunks, seed_state)
                results[body.name][backend][key] = row
                print(body.name, backend, key, json.dumps(row["max_abs_difference"]))
    files = {
        rel: hashlib.sha256((release / rel).read_bytes()).hexdigest()
        for rel in (
            "src/humanclaw_bench/envs/half_physics/hp.py",
            "src/humanclaw_bench/envs/half_physics_env.py",
            "configs/paper_fullval_v1.json",
        )
    }
    record = {
        "schema": SCHEMA,
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0]},
        "release": {"commit": _release_commit(release), "files_sha256": files},
        "imported": [
            "humanclaw_bench.envs.half_physics_env.HalfPhysicsEnv (reset, step)",
            "humanclaw_bench.envs.half_physics_env.xb75_yup_to_half_physics_pose",
            "src/humanclaw_bench/envs/half_physics/hp.py (hp_step and its helpers)",
        ],
        "re_derived": [
            "the skeleton's SMPL-X joint -> link map for the release's environment (its "
            "make_smplx_and_urdf_mappings accepts SMPL-X link names only)",
            "for the skeleton, the environment's trajectory readback (_read_agent_state, "
            "written for 54 joints) is a stub: it records the realized state, it commands "
            "nothing",
        ],
        "skills": [t for t, _ in _SKILLS],
        "stop_stand_chunks": "the procedural motion has none (the env ends the episode at a "
        "Stop): the last pose held with the joints drifting stands in",
        "held": {k: list(v) for k, v in _HELD.items()},
        "chunks_per_skill": args.chunks_per_skill,
        "seed": args.seed,
        "tolerances": TOLERANCES,
        "bodies": results,
    }
    write_json_atomic(args.out, record)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(tyro.cli(Args)))
