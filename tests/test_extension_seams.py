"""The worked examples of docs/architecture.md, through the public seams alone.

* a new sensor: a class with uuid / view / size / modes / space() / read(), passed as
  ``sensors=``;
* a new skill: one ``SkillSpec`` given to ``register_skill`` (text grammar, Gym encoding,
  the server's action spec and the random agent follow) plus a motion generator that can
  execute it, registered with the backend registry;
* a new physics backend: a class implementing the ``PhysicsBackend`` protocol, registered
  with the backend registry, its options checked against its constructor; and one built on
  the shared half-physics base (``KinematicPhysics``: engine calls only).
* a sensor that needs the scene (``SemanticClassSensor``): one class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym import EgoRGBSensor
from humanclaw_gym.backends import registry
from humanclaw_gym.backends.protocols import MotionCapabilities, PhysicsCapabilities
from humanclaw_gym.body.skeleton import JOINT_INDEX
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
from humanclaw_gym.physics.base import (
    HalfPhysicsBase,
    PhysicsOption,
    PhysicsSnapshot,
    RealizedState,
    physics_options,
)
from humanclaw_gym.physics.types import empty_contacts
from humanclaw_gym.replay.render import link_poses_from_frames
from humanclaw_gym.rotations import quat_exp
from humanclaw_gym.skills import (
    BUILTIN_MOTION_KEYS,
    DIRECTIONS,
    NUM_SKILLS,
    Choice,
    Skill,
    SkillCall,
    SkillSpec,
    action_space,
    describe_skills,
    register_skill,
    unregister_skill,
)

ENV_ID = "HumanClawFindNavInteract-v0"


# ----------------------------------------------------------------------------------------
# a sensor
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EgoGraySensor:
    """Luminance of a small ego image: ``uint8 (size, size)``."""

    size: int = 64
    uuid: str = "gray"
    view: str = "ego"
    modes: frozenset[str] = frozenset({"rgb"})

    def space(self) -> spaces.Box:
        return spaces.Box(0, 255, (self.size, self.size), dtype=np.uint8)

    def read(self, result: Any, context: Any) -> np.ndarray:
        rgb = result["rgb"].astype(np.float64)
        return np.round(rgb @ [0.299, 0.587, 0.114]).clip(0, 255).astype(np.uint8)


def test_a_new_sensor_joins_the_observation_through_sensors():
    env = gym.make(ENV_ID, split="val100", sensors=[EgoRGBSensor(), EgoGraySensor()])
    try:
        space = env.observation_space
        assert isinstance(space, spaces.Dict) and list(space) == ["rgb", "gray"]
        obs, _ = env.reset(seed=0)
        assert obs["rgb"].shape == (448, 448, 3) and obs["gray"].shape == (64, 64)
        assert space.contains(obs)
        # the gray image is its own 64 px render of the same camera, not a crop
        assert 20 < float(obs["gray"].mean()) < 235
        obs, *_ = env.step("Turn<left><30>")
        assert space.contains(obs)
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_one_sensor_gives_its_array_and_bad_sensors_are_refused():
    env = gym.make(ENV_ID, split="val100", sensors=[EgoGraySensor(size=32)])
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space == spaces.Box(0, 255, (32, 32), dtype=np.uint8)
        assert obs.shape == (32, 32) and obs.dtype == np.uint8
    finally:
        env.close()
    with pytest.raises(ValueError, match="uuid"):
        gym.make(ENV_ID, split="val100", sensors=[EgoRGBSensor(), EgoRGBSensor()])
    with pytest.raises(ValueError, match=r"sensors\[0\].size=8 is out of range"):
        gym.make(ENV_ID, split="val100", sensors=[EgoGraySensor(size=8)])
    with pytest.raises(ValueError, match="is not a Sensor"):
        gym.make(ENV_ID, split="val100", sensors=[42])
    with pytest.raises(ValueError, match="unknown sensor 'nope'; registered: rgb, depth"):
        gym.make(ENV_ID, split="val100", sensors=["nope"])


# a sensor that needs the scene: object classes per pixel (the worked example)
@dataclass(frozen=True)
class SemanticClassSensor:
    """Object class of every pixel of the head camera: ``uint8 (size, size, 1)``, ``i + 1``
    for ``classes[i]``, 0 for everything else (walls, floors, the body, the sky).

    Privileged: the objects' classes come from the scene, which is hidden state."""

    classes: tuple[str, ...] = ("chair", "bed", "couch", "toilet", "tv", "potted_plant")
    size: int = 64
    uuid: str = "semantic"
    view: str = "ego"
    modes: frozenset[str] = frozenset({"instance"})
    privileged: bool = True

    def space(self) -> spaces.Box:
        return spaces.Box(0, len(self.classes), (self.size, self.size, 1), dtype=np.uint8)

    def read(self, result: Any, context: Any) -> np.ndarray:
        objects = context.scene.objects
        lut = np.zeros(max(o.object_id for o in objects) + 2, dtype=np.uint8)  # id + 1 -> class
        for obj in objects:
            if obj.category in self.classes:
                lut[obj.object_id + 1] = self.classes.index(obj.category) + 1
        return lut[result["instance"] + 1][:, :, None]


@dataclass(frozen=True)
class InstanceIdSensor:
    """The raw instance ids of the same camera (to check the semantic image against)."""

    size: int = 64
    uuid: str = "ids"
    view: str = "ego"
    modes: frozenset[str] = frozenset({"instance"})
    privileged: bool = True

    def space(self) -> spaces.Box:
        return spaces.Box(-1, 2**31 - 1, (self.size, self.size), dtype=np.int32)

    def read(self, result: Any, context: Any) -> np.ndarray:
        return result["instance"].copy()


def test_a_scene_aware_sensor_is_one_class():
    with pytest.raises(PermissionError, match="semantic.*privileged=True"):
        gym.make(ENV_ID, split="val100", sensors=[SemanticClassSensor()])
    sensor = SemanticClassSensor()
    env = gym.make(
        ENV_ID, split="val100", privileged=True, max_steps=8,
        sensors=[EgoRGBSensor(size=64), sensor, InstanceIdSensor()],
    )  # fmt: skip
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        scene = env.unwrapped.privileged_state().scene
        category = {o.object_id: o.category for o in scene.objects}
        seen: set[str] = set()
        for step in range(8):
            ids, semantic = obs["ids"], obs["semantic"][:, :, 0]
            for obj_id in np.unique(ids):
                want = category.get(int(obj_id))
                label = sensor.classes.index(want) + 1 if want in sensor.classes else 0
                assert np.all(semantic[ids == obj_id] == label), (step, int(obj_id), want)
                if label:
                    seen.add(want)
            if len(seen) >= 2:
                break
            obs, *_ = env.step("Turn<left><45>")
        assert len(seen) >= 2  # the check saw real classes, not only background
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


# ----------------------------------------------------------------------------------------
# a skill
# ----------------------------------------------------------------------------------------
class WavingMotion(ProceduralMotionGenerator):
    """The procedural generator plus a toy ``Wave<left|right>`` of its own: the body holds
    its pose and raises one forearm a little (enough to check that the chunk is executed).
    It declares the motion key it adds (the procedural planner interface is the other way,
    see tests/test_worked_examples.py)."""

    capabilities = MotionCapabilities(name="waving", motion_keys=BUILTIN_MOTION_KEYS | {"wave"})

    def generate(self, call: Any) -> np.ndarray:
        call = SkillCall.coerce(call)
        if call.skill.spec.motion_key != "wave":
            return super().generate(call)
        history = self.history()
        chunk = np.repeat(history[-1:], self.frames_per_chunk, axis=0)
        elbow = JOINT_INDEX["left_elbow" if call.direction == "left" else "right_elbow"]
        chunk[:, 3 + 3 * elbow + 1] += np.linspace(0.0, 0.6, self.frames_per_chunk)
        self._history = np.concatenate([history, chunk])[-self.history_frames :]
        return chunk


#: The skill table before the fixture adds to it.
BUILTIN = len(Skill)


@pytest.fixture
def wave_skill():
    spec = SkillSpec(
        name="WAVE",
        display_name="Wave",
        text_name="Wave",
        slots=("direction",),
        params={"direction": Choice(DIRECTIONS)},
        action_keys={"direction": "direction"},
        meaning="wave one hand, standing still",
        example="Wave<left>",
        motion_key="wave",
    )
    skill = register_skill(spec)  # it gives the skill the next id
    registry.register_motion("waving", f"{__name__}:WavingMotion")
    try:
        yield skill
    finally:
        unregister_skill(skill)


def test_a_new_skill_is_derived_everywhere_from_its_spec(wave_skill):
    wave_id = int(wave_skill)
    assert Skill.WAVE is wave_skill and Skill(wave_id) is wave_skill and len(Skill) == BUILTIN + 1
    assert wave_id == BUILTIN and wave_skill.spec.id == wave_id
    call = SkillCall.parse("wave < Right >")
    assert call.skill is Skill.WAVE and str(call) == "Wave<right>"
    assert SkillCall.from_dict({"skill": "wave", "direction": "left"}) == SkillCall.parse(
        "Wave<left>"
    )
    space = action_space(seed=1)
    assert space["skill"] == spaces.Discrete(len(Skill))
    decoded = {SkillCall.from_action(space.sample()).skill for _ in range(400)}
    assert Skill.WAVE in decoded
    assert SkillCall.from_action(call.to_action()) == call
    spec = [s for s in describe_skills() if s["key"] == "wave"]
    assert spec and spec[0]["text"] == "Wave<left|right>" and spec[0]["id"] == wave_id

    from humanclaw_gym.server.protocol import action_spec

    assert "wave" in [s["key"] for s in action_spec()["skills"]]
    from humanclaw_agents.prompts import action_space_text

    text = action_space_text()
    assert f"action id {wave_id}: Wave<" in text and "wave one hand" in text
    from humanclaw_agents.random_policy import RandomPolicy

    policy = RandomPolicy(seed=3)
    policy.reset({"scene_id": "s", "episode_id": "e"})
    assert any(policy.act(None, {}).action.skill is Skill.WAVE for _ in range(200))


def test_a_new_skill_runs_in_the_env_with_a_generator_that_declares_it(wave_skill):
    from humanclaw_gym.skills import SkillNotExecutableError

    # a generator that cannot execute the new skill still makes the env and runs the rest;
    # the new skill is refused at its step, naming the skill and the generator
    env = gym.make(ENV_ID, split="val100", obs_size=32, max_steps=4)
    try:
        env.reset(seed=0)
        env.step("Turn<left><30>")
        with pytest.raises(SkillNotExecutableError, match="Wave<left>.*'procedural'"):
            env.step("Wave<left>")
        assert env.unwrapped.task.step_count == 1
    finally:
        env.close()
    env = gym.make(ENV_ID, split="val100", motion="waving", max_steps=3)
    try:
        obs0, _ = env.reset(seed=0)
        before = env.unwrapped.simulation.physics.realized_frame()
        obs, reward, terminated, truncated, info = env.step("Wave<left>")
        after = env.unwrapped.simulation.physics.realized_frame()
        assert info["executed_skill"] == "Wave<left>" and not terminated
        assert np.linalg.norm(after[:3] - before[:3]) < 0.05  # stood still
        assert env.action_space["skill"] == spaces.Discrete(BUILTIN + 1)
    finally:
        env.close()
    assert len(Skill) == BUILTIN + 1  # unregistered by the fixture afterwards


def test_a_new_skill_joins_the_action_adapters_menus(wave_skill):
    from humanclaw_gym.wrappers import DiscreteSkills, MultiDiscreteSkills, skill_menu

    menu = [str(c) for c in skill_menu()]
    assert menu[-2:] == ["Wave<left>", "Wave<right>"]
    env = gym.make(ENV_ID, split="val100", motion="waving", obs_size=32, max_steps=3)
    try:
        discrete = DiscreteSkills(env)
        assert discrete.action_space == spaces.Discrete(len(menu))
        _, info = discrete.reset(seed=0)
        assert info["action_menu"][-1] == "Wave<right>"
        _, _, _, _, info = discrete.step(len(menu) - 1)
        assert info["executed_skill"] == "Wave<right>"
        multi = MultiDiscreteSkills(env)
        assert multi.grids[0][-1] == "Wave" and multi.action_space.nvec[0] == len(Skill)
        index = [0] * len(multi.dims)
        index[0] = int(wave_skill)
        index[multi.dims.index("direction")] = multi.grids[multi.dims.index("direction")].index(
            "right"
        )
        assert str(multi.to_skill_call(index)) == "Wave<right>"
    finally:
        env.close()


def test_the_table_is_back_to_the_built_in_skills():
    assert len(Skill) == BUILTIN == NUM_SKILLS and not hasattr(Skill, "WAVE")
    assert action_space()["skill"] == spaces.Discrete(NUM_SKILLS)
    with pytest.raises(ValueError, match="only the last custom skill"):
        unregister_skill(Skill.CLIMB_DOWN)


def test_register_skill_refuses_a_bad_spec_and_changes_nothing():
    base = dict(
        name="JUMP",
        display_name="Jump",
        text_name="Jump",
        slots=("height_m",),
        params={"height_m": Choice(("low",))},
        action_keys={},
        meaning="jump",
        example="Jump<low>",
        motion_key="jump",
    )
    with pytest.raises(ValueError, match="id=3 is invalid"):
        register_skill(SkillSpec(**{**base, "id": 3}))
    with pytest.raises(ValueError, match="taken"):
        register_skill(SkillSpec(**{**base, "text_name": "Turn"}))
    with pytest.raises(ValueError, match="slots"):
        register_skill(SkillSpec(**{**base, "slots": ()}))
    with pytest.raises(ValueError, match="not SkillCall fields"):
        register_skill(SkillSpec(**{**base, "params": {"hop": Choice(("a",))}, "slots": ("hop",)}))
    assert len(Skill) == BUILTIN


# ----------------------------------------------------------------------------------------
# a physics backend
# ----------------------------------------------------------------------------------------
class CountingPhysics:
    """The pybullet backend behind a different name, counting frames: enough to show that
    the env drives any registered PhysicsBackend and checks its options."""

    capabilities = PhysicsCapabilities(name="counting")

    def __init__(self, *, label: str = "x") -> None:
        from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

        self._inner = PybulletHalfPhysics()
        self.label = label
        self.frames = 0

    def step_frame(self, frame_75: np.ndarray) -> None:
        self.frames += 1
        self._inner.step_frame(frame_75)

    def step_frames(self, frames: np.ndarray) -> None:  # a chunk at once (the base has it)
        self.frames += len(frames)
        self._inner.step_frames(frames)

    def contract(self) -> dict:
        return {**self._inner.contract(), "backend": "counting", "label": self.label}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_new_physics_backend_plugs_in_through_the_registry():
    registry.register_physics("counting", f"{__name__}:CountingPhysics")
    with pytest.raises(
        ValueError, match=r"physics_options \['solver_iterations'\] are not accepted"
    ):
        gym.make(
            ENV_ID, split="val100", physics="counting", physics_options={"solver_iterations": 5}
        )
    env = gym.make(ENV_ID, split="val100", physics="counting", physics_options={"label": "y"})
    try:
        env.reset(seed=0)
        env.step("Walk<forward><slow>")
        physics = env.unwrapped.simulation.physics
        assert physics.frames == 15 and physics.contract()["label"] == "y"
    finally:
        env.close()


def _lag(value: Any) -> float:
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"lag must be in [0, 1), got {value}")
    return float(value)


class KinematicPhysics(HalfPhysicsBase):
    """The smallest physics backend on the shared base: the body follows the generated
    frames exactly (no dynamics, no contacts), objects stay where the scene puts them, rays
    hit the tops of the parts' boxes. Only the engine calls are written here; checks,
    lifecycle, readouts of the realized state and the contract record are the base's."""

    capabilities = PhysicsCapabilities(name="kinematic", contacts=False)
    # its keywords, declared once: the shared ones (one solver iteration by default) and
    # its own (checked, kept as self.lag, recorded by contract())
    options = physics_options(
        PhysicsOption("lag", 0.0, "share of the previous pose kept each frame", check=_lag),
        solver_iterations=1,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._frame: np.ndarray | None = None

    def _build_engine(self, scene: Any) -> list[int]:
        return [o.object_id for o in scene.dynamic_objects]  # the rows of object_poses

    def _close_engine(self) -> None:
        self._frame = None

    def _place(self, frame: np.ndarray) -> RealizedState:
        self._frame = frame.copy()
        return RealizedState(frame[0:3], quat_exp(frame[3:].reshape(-1, 3)))

    def _reset_engine(self, frame: np.ndarray) -> RealizedState:
        return self._place(frame)

    def _step_engine(self, frame: np.ndarray) -> RealizedState:
        return self._place(self.lag * self._frame + (1.0 - self.lag) * frame)

    def _ray_down(self, x: float, z: float, from_y: float, to_y: float) -> float | None:
        tops = [hi[1] for lo, hi in (o.aabb() for o in self._scene.objects)
                if lo[0] <= x <= hi[0] and lo[2] <= z <= hi[2] and to_y <= hi[1] <= from_y]  # fmt: skip
        return max(tops, default=None)

    def _snapshot(self) -> Any:
        return _KinematicSnapshot(owner=id(self), episode=self._episode, frame=self._frame)

    def _restore(self, state: Any) -> RealizedState:
        return self._place(state.frame)

    def _contract_engine(self) -> dict:
        return {"collision_margin_m": 0.0, "dynamics": "none: the body follows the frames"}

    def link_poses(self) -> np.ndarray:
        self._require_episode("link_poses")
        return link_poses_from_frames(self._frame)

    def object_poses(self) -> np.ndarray:
        self._require_built("object_poses")
        objs = self._scene.dynamic_objects
        return np.array([[*o.position, *o.quat_xyzw()] for o in objs]).reshape(-1, 7)

    def contacts(self, parts: bool = True) -> np.ndarray:
        self._require_episode("contacts")
        return empty_contacts()


@dataclass(frozen=True)
class _KinematicSnapshot(PhysicsSnapshot):
    frame: np.ndarray


def test_a_physics_backend_on_the_shared_base_runs_the_env():
    registry.register_physics("kinematic", f"{__name__}:KinematicPhysics")
    with pytest.raises(ValueError, match=r"physics_options \['stiffness'\] are not accepted"):
        gym.make(ENV_ID, split="val100", physics="kinematic", physics_options={"stiffness": 1})
    env = gym.make(ENV_ID, split="val100", physics="kinematic", privileged=True, obs_size=32,
                   max_steps=3)  # fmt: skip
    realized: list[np.ndarray] = []  # an observer of every frame: the base's record_frames

    class _Frames:
        def on_frame(self, event):
            realized.append(event.realized)

    env.unwrapped.add_observer(_Frames())
    try:
        env.reset(seed=0)
        physics = env.unwrapped.simulation.physics
        start = env.unwrapped.privileged_state().realized_frame
        env.step("Walk<forward><normal>")
        after = env.unwrapped.privileged_state()
        assert np.linalg.norm(after.realized_frame[[0, 2]] - start[[0, 2]]) > 0.2
        assert after.link_origins.shape == (25, 3) and after.object_poses.shape[1] == 7
        assert len(realized) == 15
        assert realized[-1].tobytes() == after.realized_frame.tobytes()
        contract = physics.contract()
        assert contract["backend"] == "kinematic" and contract["lag"] == 0.0
        assert contract["substeps_per_frame"] == 4 and "dynamics" in contract
        with pytest.raises(ValueError, match=r"shape \(75,\)"):
            physics.step_frame(np.zeros(3))
        state = physics.get_state()
        physics.reset(start)
        with pytest.raises(ValueError, match="valid until the next reset"):
            physics.set_state(state)
    finally:
        env.close()


def test_every_backend_config_field_is_a_shorthand_of_env_and_run_config():
    """A new BackendConfig field becomes an env keyword and a RunConfig keyword at once,
    and each RunConfig shorthand lands in the field of the same name."""
    import inspect
    from dataclasses import fields

    from humanclaw_gym.backends.config import BACKEND_FIELDS, BackendConfig
    from humanclaw_gym.envs.env import _backend_config
    from humanclaw_gym.evaluation.batch import RunConfig

    assert BACKEND_FIELDS == tuple(f.name for f in fields(BackendConfig))
    params = list(inspect.signature(RunConfig).parameters)
    assert tuple(params[-len(BACKEND_FIELDS) :]) == BACKEND_FIELDS
    values = {
        "physics": "mujoco",
        "physics_options": {"solver_iterations": 12},
        "renderer": "tiny",
        "motion": "flow",
        "motion_checkpoint": "ckpt.pt",
        "motion_options": {"steps": 3},
        "body_model_dir": "/models",
        "body_model_gender": "female",
        "scene_dataset": "/hssd",
        "body_asset": "/body",
    }
    assert set(values) == set(BACKEND_FIELDS)
    for name, value in values.items():
        assert getattr(RunConfig(**{name: value}).backend, name) == value
        assert getattr(_backend_config(None, {name: value}), name) == value
    with pytest.raises(TypeError, match="backend keywords"):
        _backend_config(None, {"solver_iterations": 3})
