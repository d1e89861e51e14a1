"""A skill registered on top of the built-in ones, with motion (issue 34, "skills with motion").

* The procedural planner interface covers the arms and the whole body: a ``Wave<left|right>``
  planner (:func:`register_planner`, :class:`ArmMotion`) raises one hand above the head and
  swings the forearm side to side while the body stands.
* A generator that does not declare the skill's motion still makes the env and runs the
  built-in skills; the new skill is refused at its step (naming the skill and the
  generator, nothing changed), in the env, a sync vector env and a batched vector env,
  with the procedural, flow and paper generators.
* Everything that lists the skills derives from the skill table: the counts, the PSV
  prompts' tables and reply reading, the random agent, the debug viewer's controls, the
  server's action spec and protocol id, ``humanclaw doctor``'s listing.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym.body.skeleton import JOINT_INDEX, forward_kinematics
from humanclaw_gym.motion.procedural import (
    ArmMotion,
    ProceduralMotionGenerator,
    register_planner,
    unregister_planner,
)
from humanclaw_gym.skills import (
    DIRECTIONS,
    NUM_SKILLS,
    Choice,
    Skill,
    SkillCall,
    SkillNotExecutableError,
    SkillSpec,
    register_skill,
    skill_specs,
    unregister_skill,
)

ENV_ID = "HumanClawFindNavInteract-v0"
BUILTIN = len(Skill)


def plan_wave(generator, start, condition):
    """Stand and wave one hand: the upper arm out to the side, the forearm up, swinging."""
    plan = generator.base_plan(start)
    s = generator.chunk_phase()
    arm = ArmMotion(
        lowered_rad=0.0,
        forward_rad=np.pi / 2,
        elbow_rad=np.pi / 2 + 0.5 * np.sin(4 * np.pi * s),
    )
    plan.arms = (arm, None) if condition["left"] else (None, arm)
    return plan


@pytest.fixture
def wave():
    """``Wave<left|right>`` with a procedural planner, removed afterwards."""
    skill = register_skill(
        SkillSpec(
            name="WAVE",
            display_name="Wave",
            text_name="Wave",
            slots=("direction",),
            params={"direction": Choice(DIRECTIONS)},
            action_keys={"direction": "direction"},
            meaning="wave one hand above the head, standing",
            example="Wave<left>",
            motion_key="wave",
            condition=lambda p: {"left": float(p["direction"] == "left")},
        )
    )
    register_planner("wave", plan_wave)
    try:
        yield skill
    finally:
        unregister_planner("wave")
        unregister_skill(skill)


@pytest.fixture
def bow():
    """``Bow``: a skill no generator has a planner for."""
    skill = register_skill(
        SkillSpec(
            name="BOW",
            display_name="Bow",
            text_name="Bow",
            slots=(),
            params={},
            action_keys={},
            meaning="bow",
            example="Bow",
            motion_key="bow",
        )
    )
    try:
        yield skill
    finally:
        unregister_skill(skill)


def _wrist_heights(frames: np.ndarray, side: str) -> np.ndarray:
    joint = JOINT_INDEX[f"{side}_wrist"]
    return np.array([forward_kinematics(f)[0][joint][1] for f in frames])


# ----------------------------------------------------------------------------------------
# motion
# ----------------------------------------------------------------------------------------
def test_the_planner_interface_moves_an_arm(wave) -> None:
    gen = ProceduralMotionGenerator()
    history = gen.reset(np.zeros(3), 0.0, seed=0)
    pos, _ = forward_kinematics(history[-1])
    head_y = pos[JOINT_INDEX["head"], 1]
    standing_wrist = _wrist_heights(history[-1:], "left")[0]
    assert ProceduralMotionGenerator.capabilities.executes(wave)
    chunk = gen.generate(SkillCall.parse("Wave<left>"))
    left, right = _wrist_heights(chunk, "left"), _wrist_heights(chunk, "right")
    # the left hand goes up above the head (from hanging by the thigh) and stays there
    assert left[0] < standing_wrist + 0.3 and left[-1] > head_y
    assert left.max() - standing_wrist > 0.6
    # ... and waves: the wrist swings sideways while it is up
    up = left > head_y
    joint = JOINT_INDEX["left_wrist"]
    lateral = np.array([forward_kinematics(f)[0][joint][0] for f in chunk])[up]
    assert lateral.max() - lateral.min() > 0.15
    # the other arm keeps its carriage and the body stands where it stood
    assert np.ptp(right) < 0.05
    assert np.linalg.norm(chunk[-1, [0, 2]] - history[-1, [0, 2]]) < 0.02
    # the next skill brings the arm down again
    after = gen.generate(SkillCall.parse("Walk<forward><slow>"))
    assert _wrist_heights(after[-1:], "left")[0] < standing_wrist + 0.1


def test_a_planner_must_return_a_plan_and_offsets_spare_the_legs(wave) -> None:
    gen = ProceduralMotionGenerator()
    gen.reset(np.zeros(3), 0.0)
    register_planner("wave", lambda g, start, c: None, replace=True)
    with pytest.raises(TypeError, match="not a Plan"):
        gen.generate("Wave<left>")

    def nod(g, start, c):
        plan = g.base_plan(start)
        plan.joint_offsets = {"head": np.array([0.4, 0.0, 0.0])}
        return plan

    register_planner("wave", nod, replace=True)
    chunk = gen.generate("Wave<left>")
    head = JOINT_INDEX["head"]
    assert np.linalg.norm(chunk[-1, 3 + 3 * head : 6 + 3 * head]) > 0.3  # the head nodded

    def kick(g, start, c):
        plan = g.base_plan(start)
        plan.joint_offsets = {"left_knee": np.zeros(3)}
        return plan

    register_planner("wave", kick, replace=True)
    with pytest.raises(ValueError, match="joint_offsets 'left_knee' is invalid"):
        gen.generate("Wave<left>")
    with pytest.raises(ValueError, match="already has a planner"):
        register_planner("turn", plan_wave)


def test_the_env_runs_the_new_skill(wave) -> None:
    env = gym.make(ENV_ID, split="val100", privileged=True, obs_size=32, max_steps=4)
    try:
        env.reset(seed=0)
        before = env.unwrapped.privileged_state()
        _, _, terminated, _, info = env.step("Wave<right>")
        after = env.unwrapped.privileged_state()
        assert info["executed_skill"] == "Wave<right>" and not terminated
        assert np.linalg.norm(after.root_xz - before.root_xz) < 0.05
        # the realized (post-physics) right wrist is above the head
        link = env.unwrapped.simulation.body_links
        origins = after.link_origins[1:]
        names = list(link) if link is not None else list(JOINT_INDEX)
        assert origins[names.index("right_wrist"), 1] > origins[names.index("head"), 1]
    finally:
        env.close()


# ----------------------------------------------------------------------------------------
# a generator that lacks the skill: refused at the step
# ----------------------------------------------------------------------------------------
def _refused_without_change(env: gym.Env, call: str, generator: str) -> None:
    state = env.unwrapped.privileged_state()
    steps = env.unwrapped.task.step_count
    with pytest.raises(SkillNotExecutableError, match=rf"{call}.*'{generator}'") as refused:
        env.step(call)
    assert "\n" not in str(refused.value) and refused.value.generator == generator
    assert env.unwrapped.task.step_count == steps
    after = env.unwrapped.privileged_state()
    assert after.realized_frame.tobytes() == state.realized_frame.tobytes()


def test_procedural_refuses_a_skill_without_planner_at_its_step(bow) -> None:
    env = gym.make(ENV_ID, split="val100", privileged=True, obs_size=32, max_steps=4)
    try:
        env.reset(seed=0)
        _refused_without_change(env, "Bow", "procedural")
        _, _, terminated, truncated, _ = env.step("Turn<left><30>")  # the episode goes on
        assert not (terminated or truncated) and env.unwrapped.task.step_count == 1
    finally:
        env.close()


def test_flow_makes_the_env_runs_the_built_in_skills_and_refuses_the_new_one(wave) -> None:
    pytest.importorskip("torch")
    env = gym.make(
        ENV_ID, split="val100", motion="flow", motion_options={"steps": 2}, privileged=True,
        obs_size=32, max_steps=5,
    )  # fmt: skip
    try:
        env.reset(seed=0)
        env.step("Walk<forward><slow>")
        _refused_without_change(env, r"Wave<left>", "flow")
        _, _, _, _, info = env.step("Turn<right><30>")
        assert info["executed_skill"] == "Turn<right><30>"
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["sync", "batched"])
def test_a_vector_env_refuses_before_any_sub_env_steps(bow, mode: str) -> None:
    from humanclaw_gym.envs.vector import make_vector_env

    envs = make_vector_env(2, mode=mode, split="val100", obs_size=32, privileged=True)
    try:
        envs.reset(seed=0)
        subs = [e.unwrapped for e in envs.envs]
        frames = [e.privileged_state().realized_frame.tobytes() for e in subs]
        with pytest.raises(SkillNotExecutableError, match="sub-env 1: .*Bow.*'procedural'"):
            envs.step(["Walk<forward><slow>", "Bow"])
        assert [e.task.step_count for e in subs] == [0, 0]
        assert [e.privileged_state().realized_frame.tobytes() for e in subs] == frames
        envs.step(["Walk<forward><slow>", "Turn<left><30>"])
        assert [e.task.step_count for e in subs] == [1, 1]
    finally:
        envs.close()


def test_the_paper_profile_makes_the_env_with_a_new_skill_registered(tmp_path: Path, wave):
    pytest.importorskip("torch")
    pytest.importorskip("trimesh")
    from paper_release_synthetic import write_release_checkout

    from humanclaw_gym.motion.paper import clear_model_cache
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    synth = write_synthetic_dataset(tmp_path / "hssd" / "humanclaw-hssd-synth")
    release = tmp_path / "release" / "HumanCLAW"
    write_release_checkout(release, episodes_dir=synth.episodes_dir.parent)
    write_synthetic_release(release, seed=3, hidden_dim=32, num_layers=2, num_heads=2, nfe_steps=4)
    env = gym.make(ENV_ID, profile="paper", release_dir=str(release),
                   scene_dataset=str(synth.root), privileged=True, obs_size=32)  # fmt: skip
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step("Turn<left><30>")
        assert info["executed_skill"] == "Turn<left><30>"
        _refused_without_change(env, r"Wave<left>", "paper")
    finally:
        env.close()
        clear_model_cache()


# ----------------------------------------------------------------------------------------
# everything that lists the skills
# ----------------------------------------------------------------------------------------
def test_counts_and_prompts_derive_from_the_table(wave) -> None:
    from humanclaw_agents.prompts import action_space_text, skill_table

    wave_id = int(wave)
    assert NUM_SKILLS == BUILTIN == len(skill_specs()) - 1
    assert len(Skill) == NUM_SKILLS + 1 and wave_id == NUM_SKILLS
    rows = skill_table().splitlines()
    assert len(rows) == 1 + len(Skill)
    assert (
        rows[-1] == f"{wave_id} | Wave | Wave<left|right> | wave one hand above the head, standing"
    )
    assert [r.split(" | ")[0] for r in rows[1:]] == [str(int(s)) for s in Skill]
    text = action_space_text()
    assert f"action id {wave_id}: Wave<direction> - direction: <left> or <right>" in text
    assert f"{wave_id} Wave<direction>" in action_space_text(style="compact")


def test_the_reference_reply_reader_reads_the_new_skill(wave) -> None:
    from humanclaw_agents.actions import action_from_reply

    call, notes = action_from_reply(int(wave), "Wave<right>")
    assert str(call) == "Wave<right>" and notes == []
    call, _ = action_from_reply(None, "wave<left>")
    assert str(call) == "Wave<left>"
    call, notes = action_from_reply(int(wave), "wave please")
    assert str(call) == "Wave<left>" and "no Wave form" in notes[0]
    call, _ = action_from_reply(int(wave) + 1, "Wave<right>")  # no such id: the reference rule
    assert str(call) == "Stop/Stand"


def test_the_random_agent_draws_the_new_skill(wave) -> None:
    from humanclaw_agents.random_policy import RandomPolicy

    policy = RandomPolicy(seed=1)
    policy.reset({"scene_id": "s", "episode_id": "e"})
    drawn = {policy.act(None, {}).action.skill for _ in range(400)}
    assert drawn == set(Skill)


def test_the_server_describes_the_new_skill(wave) -> None:
    from humanclaw_gym.server.protocol import BENCHMARK_PROTOCOL, action_spec, benchmark_protocol

    keys = [s["key"] for s in action_spec()["skills"]]
    assert keys == [s.key for s in Skill] and keys[-1] == "wave"
    assert BENCHMARK_PROTOCOL.endswith(f"-skillcall{NUM_SKILLS}/v1")
    assert benchmark_protocol() == BENCHMARK_PROTOCOL.replace("/v1", "+wave/v1")


def test_the_protocol_id_is_the_benchmark_one_without_added_skills() -> None:
    from humanclaw_gym.server.protocol import BENCHMARK_PROTOCOL, benchmark_protocol

    assert benchmark_protocol() == BENCHMARK_PROTOCOL
    assert BENCHMARK_PROTOCOL == "humanclaw.find-nav-interact/ego-rgb448-skillcall8/v1"


def test_doctor_lists_the_new_skill(wave) -> None:
    from humanclaw_gym.doctor import format_report, registered

    listed = registered()
    assert [item["name"] for item in listed["skill"]] == [s.key for s in Skill]
    assert "wave one hand" in format_report({**_minimal_report(), "registered": listed})


def _minimal_report() -> dict:
    from humanclaw_gym.doctor import installation_report

    return installation_report(probe=False)


def test_the_viewer_controls_list_the_new_skill(wave) -> None:
    pytest.importorskip("viser")
    from humanclaw_gym.envs import FindNavInteractEnv
    from humanclaw_gym.viewer.debug_viewer import DebugViewer

    env = FindNavInteractEnv(split="val100", obs_size=32, max_steps=3)
    viewer = DebugViewer(env, None, port=0, paused=True)
    try:
        handles = viewer.gui_handles
        assert list(handles["skill"].options) == [s.display_name for s in Skill]
        handles["skill"].value = "Wave"
        handles["param_direction"].value = "right"
        assert viewer._skill_from_form() == "Wave<right>"
        assert handles["param_direction"].visible and not handles["param_angle_deg"].visible
    finally:
        viewer.close()
        env.close()


def test_the_server_refuses_a_skill_its_generator_lacks_as_an_invalid_action(
    tmp_path: Path, bow
) -> None:
    """The benchmark server: ``describe`` announces the extended contract, and a step that
    names the skill the procedural generator has no planner for is an ``invalid_action``
    (nothing executed, the sequence number not consumed), after which the episode goes on."""
    from humanclaw_gym.server.plan import EpisodePlan
    from humanclaw_gym.server.service import BenchService

    plan = EpisodePlan.from_selection("val100", 3, str(tmp_path / "out"), limit=1)
    service = BenchService(plan, max_steps=3)

    def call(method: str, **params):
        return service.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})

    try:
        described = call("describe")["result"]
        assert described["benchmark_protocol"].endswith("+bow/v1")
        assert described["action_spec"]["skills"][-1]["key"] == "bow"
        handle = call("open")["result"]["episode_handle"]
        assert "result" in call("reset", episode_handle=handle, sequence=0)
        refused = call("step", episode_handle=handle, sequence=1, action="Bow")["error"]
        assert refused["data"]["error"] == "invalid_action", refused
        assert refused["data"]["executed"] is False and refused["data"]["field"] == "skill"
        assert "'procedural'" in refused["message"]
        done = call("step", episode_handle=handle, sequence=1, action="Turn<left><30>")
        assert done["result"]["executed"] is True
    finally:
        service.close()
