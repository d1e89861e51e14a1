"""The env's parts: the task beside it, the simulation's snapshots, the one lifecycle state,
the one action validation, and what the observers are fed."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym import SkillCall
from humanclaw_gym.envs.task import FindNavInteractTask
from humanclaw_gym.episodes import load_split
from humanclaw_gym.skills import SkillCallError

ENV_ID = "HumanClawFindNavInteract-v0"


@pytest.fixture(scope="module")
def episodes():
    return load_split("val100")


# -- the task ------------------------------------------------------------------------------


def test_task_clock_limit_ending_and_info(episodes):
    task = FindNavInteractTask(episodes[:3], max_steps=2)
    first = task.choose(None, None)
    assert first.episode_id == episodes[0].episode_id
    assert task.episode is None  # choosing starts nothing
    task.begin(first)
    info = task.info()
    assert (info["step"], info["max_steps"], info["executed_skill"]) == (0, 2, None)
    assert not task.executes_motion(SkillCall.stop()) and task.executes_motion(SkillCall.walk())
    assert task.advance(SkillCall.walk("slow")) == (False, False)
    assert task.advance(SkillCall.turn("left", 20)) == (False, True)  # the limit truncates
    assert task.info()["executed_skill"] == "Turn<left><20>"
    task.begin(first)
    assert task.advance(SkillCall.stop()) == (True, False)  # Stop terminates, never truncates
    # the episode's own limit without an override
    assert FindNavInteractTask(episodes[:1]).max_steps == 100


def test_task_refuses_bad_options_and_limits_before_changing_anything(episodes):
    with pytest.raises(ValueError, match="max_steps must be an int >= 1"):
        FindNavInteractTask(episodes, max_steps=0)
    task = FindNavInteractTask(episodes)
    with pytest.raises(ValueError, match="unknown reset options"):
        task.choose(None, {"episode": "x"})
    with pytest.raises(ValueError, match="nope"):
        task.choose(None, {"episode_id": "nope"})
    assert task.choose(None, None).episode_id == episodes[0].episode_id  # order untouched
    assert FindNavInteractTask.episode_seed(episodes[0]) == FindNavInteractTask.episode_seed(
        episodes[0]
    )


# -- snapshots -----------------------------------------------------------------------------


def test_snapshot_reads_each_part_once_per_state_and_is_read_only(episodes):
    env = gym.make(ENV_ID, split="val100", max_steps=4)
    try:
        env.reset(options={"episode_id": episodes[0].episode_id})
        sim = env.unwrapped.simulation
        calls = {"contacts": 0}
        query = sim.physics.contacts

        def counted(parts=True):
            calls["contacts"] += 1
            return query(parts)

        sim.physics.contacts = counted
        snap = sim.snapshot()
        assert sim.snapshot() is snap
        first = snap.contacts
        assert snap.contacts is first and calls["contacts"] == 1
        assert np.array_equal(snap.realized_frame, sim.physics.realized_frame())
        with pytest.raises(ValueError, match="read-only"):
            snap.realized_frame[0] = 1.0
        env.step(SkillCall.walk("slow"))
        assert sim.snapshot() is not snap
        with pytest.raises(RuntimeError, match="moved on"):
            snap.link_origins  # noqa: B018  (never read for the earlier state)
        assert snap.contacts is first  # what it read stays readable
    finally:
        env.close()


class _Counting:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.contacts: list[np.ndarray] = []

    def on_reset(self, event):
        self.events.append("reset")

    def on_frame(self, event):
        self.contacts.append(event.contacts)

    def on_episode_end(self, event):
        self.events.append(event.reason)


def test_two_observers_share_one_contact_query_per_frame(episodes):
    env = gym.make(ENV_ID, split="val100", max_steps=4)
    a, b = _Counting(), _Counting()
    base = env.unwrapped
    base.add_observer(a, needs=("contacts",))
    base.add_observer(b, needs=("contacts",))
    try:
        env.reset(options={"episode_id": episodes[0].episode_id})
        physics = base.simulation.physics
        chunks, queries = [], []
        record, query = physics.record_frames, physics._frame_contacts
        physics.record_frames = lambda frames, **kw: chunks.append(kw) or record(frames, **kw)
        physics._frame_contacts = lambda parts: queries.append(parts) or query(parts)
        env.step(SkillCall.walk("normal"))
        # no image of each frame asked for: the chunk is recorded at once, one query a frame
        assert chunks == [{"contacts": True, "contact_parts": False}]
        assert queries == [False] * 15 and len(a.contacts) == 15
        assert all(x is y for x, y in zip(a.contacts, b.contacts, strict=True))
    finally:
        env.close()


def test_frame_images_run_the_chunk_frame_by_frame_with_one_query_each(episodes):
    env = gym.make(ENV_ID, split="val100", max_steps=4)
    a = _Counting()
    base = env.unwrapped
    base.add_observer(a, needs=("contacts", "frame_ego"))
    try:
        env.reset(options={"episode_id": episodes[0].episode_id})
        physics = base.simulation.physics
        calls = []
        query = physics.contacts
        physics.contacts = lambda parts=True: calls.append(parts) or query(parts)
        physics.record_frames = None  # never used on this path
        env.step(SkillCall.walk("normal"))
        assert calls == [False] * 15 and len(a.contacts) == 15
    finally:
        env.close()


def test_a_failing_frame_of_a_recorded_chunk_ends_the_step_after_the_frames_before_it(episodes):
    env = gym.make(ENV_ID, split="val100", max_steps=4)
    a = _Counting()
    base = env.unwrapped
    base.add_observer(a, needs=("contacts",))
    try:
        env.reset(options={"episode_id": episodes[0].episode_id})
        physics = base.simulation.physics
        step, ran = physics._step_engine, []

        def failing(frame):
            if len(ran) == 6:
                raise RuntimeError("simulated divergence")
            state = step(frame)  # the engine hook returns the realized state
            ran.append(frame)
            return state

        physics._step_engine = failing
        with pytest.raises(RuntimeError, match="simulated divergence"):
            env.step(SkillCall.walk("normal"))
        assert len(a.contacts) == 6 and a.events == ["reset", "error"]
    finally:
        env.close()


class _Frames:
    def __init__(self) -> None:
        self.frames: list[tuple[bytes, ...]] = []

    def on_frame(self, event):
        self.frames.append(
            (
                event.generated.tobytes(),
                event.realized.tobytes(),
                event.object_poses.tobytes(),
                event.contacts.tobytes(),
                bytes([event.frame_index, event.last_in_chunk]),
            )
        )


@pytest.mark.parametrize("physics", ["pybullet", "mujoco"])
@pytest.mark.parametrize("parts", [False, True])
def test_recorded_chunks_give_the_frame_by_frame_events_bit_for_bit(episodes, physics, parts):
    """A chunk recorded at once (no image of each frame asked for) hands observers the very
    bytes of running it frame by frame (a "frame_ego" observer forces that path)."""
    if physics == "mujoco":
        pytest.importorskip("mujoco")
    need = "contact_parts" if parts else "contacts"
    seen = {}
    for path, needs in (("recorded", (need,)), ("live", (need, "frame_ego"))):
        env = gym.make(ENV_ID, split="val100", max_steps=6, physics=physics)
        spy = _Frames()
        env.unwrapped.add_observer(spy, needs=needs)
        try:
            env.reset(options={"episode_id": episodes[1].episode_id})
            for call in (
                SkillCall.walk("fast"),
                SkillCall.turn("left", 45),
                SkillCall.walk("slow"),
            ):
                env.step(call)
        finally:
            env.close()
        seen[path] = spy.frames
    assert len(seen["recorded"]) == 45 and seen["recorded"] == seen["live"]


@pytest.mark.parametrize("physics", ["pybullet", "mujoco"])
def test_the_metrics_wrapper_leaves_the_trajectory_bit_for_bit(episodes, physics):
    """The wrapper's observers (contacts of every frame, the chunk recorded at once) change
    nothing of what the simulation does: observations, realized frames and object poses
    after every decision are the bare env's, byte for byte."""
    from humanclaw_gym.wrappers import MetricsWrapper

    if physics == "mujoco":
        pytest.importorskip("mujoco")
    runs = {}
    for name in ("bare", "metrics"):
        env = gym.make(ENV_ID, split="val100", max_steps=8, physics=physics, privileged=True)
        env = MetricsWrapper(env) if name == "metrics" else env
        seen = []
        try:
            env.reset(options={"episode_id": episodes[2].episode_id})
            for call in ("Walk<forward><fast>", "Turn<left><60>", "Walk<forward><normal>"):
                obs, *_ = env.step(call)
                state = env.unwrapped.privileged_state()
                seen.append(
                    (obs["rgb"].tobytes() if isinstance(obs, dict) else obs.tobytes(),
                     state.realized_frame.tobytes(), state.object_poses.tobytes())
                )  # fmt: skip
        finally:
            env.close()
        runs[name] = seen
    assert len(runs["bare"]) == 3 and runs["bare"] == runs["metrics"]


def test_the_decision_instance_image_comes_from_the_observation_pass(episodes):
    from humanclaw_gym.wrappers import MetricsWrapper

    env = MetricsWrapper(gym.make(ENV_ID, split="val100", max_steps=4))
    base = env.unwrapped
    try:
        obs, _ = env.reset(options={"episode_id": episodes[0].episode_id})
        renderer = base.simulation.renderer
        passes = []
        render = renderer.render
        renderer.render = lambda camera, modes: (
            passes.append(sorted(modes)) or render(camera, modes)
        )
        obs, *_ = env.step(SkillCall.turn("left", 30))
        # one pass per decision: the observation, with the next decision's instance image
        assert passes == [["instance", "rgb"]]
        sim = base.simulation
        again = sim.render("ego", 448, ("rgb", "instance"))
        assert np.array_equal(again.rgb, obs)
        sim._version += 1  # force a fresh render of the same state: same bytes
        fresh = sim.render("ego", 448)
        assert np.array_equal(fresh.rgb, obs)
    finally:
        env.close()


# -- the lifecycle -------------------------------------------------------------------------


def test_one_lifecycle_state(episodes):
    env = gym.make(ENV_ID, split="val100", max_steps=2, privileged=True)
    base = env.unwrapped
    seen = _Counting()
    base.add_observer(seen)
    eid = episodes[0].episode_id
    with pytest.raises(RuntimeError, match="before reset"):
        base.step(SkillCall.walk())  # the env itself (Gymnasium's order wrapper says so too)
    with pytest.raises(RuntimeError, match="before reset"):
        base.privileged_state()
    env.reset(options={"episode_id": eid})
    env.reset(options={"episode_id": eid})  # abandons the running episode
    env.step(SkillCall.walk("slow"))
    *_, truncated, _ = env.step(SkillCall.walk("slow"))
    assert truncated
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(SkillCall.walk())
    assert base.privileged_state().step == 2  # the ended episode can still be looked at
    env.reset(options={"episode_id": eid})
    env.close()
    env.close()
    assert seen.events == ["reset", "abandoned", "reset", "truncated", "reset", "abandoned"]
    for call in (lambda: base.step(SkillCall.walk()), base.privileged_state, base.reset):
        with pytest.raises(RuntimeError, match="closed environment"):
            call()


def test_an_error_in_a_step_ends_the_episode_once(episodes):
    env = gym.make(ENV_ID, split="val100", max_steps=5)
    base = env.unwrapped
    seen = _Counting()
    base.add_observer(seen)
    try:
        env.reset(options={"episode_id": episodes[0].episode_id})

        def broken(call):
            raise RuntimeError("generator broke")

        base.simulation.motion.generate = broken
        with pytest.raises(RuntimeError, match="generator broke"):
            env.step(SkillCall.walk())
        with pytest.raises(RuntimeError, match="after the episode ended"):
            env.step(SkillCall.walk())
    finally:
        env.close()
    assert seen.events == ["reset", "error"]


# -- one validation ------------------------------------------------------------------------


def test_an_invalid_vector_action_is_refused_before_any_sub_env_steps():
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", max_steps=3)
    try:
        envs.reset(seed=0)
        before = [e.unwrapped.task.step_count for e in envs.envs]
        batch = envs.action_space.sample()
        batch["skill"][1] = 99  # sub-env 1's entry is invalid
        with pytest.raises(SkillCallError, match=r"actions\[1\]"):
            envs.step(batch)
        assert [e.unwrapped.task.step_count for e in envs.envs] == before  # nothing stepped
    finally:
        envs.close()


@pytest.mark.parametrize("mode", ["sync", "batched"])
def test_vector_actions_are_decoded_once(mode, monkeypatch):
    decode = SkillCall.__dict__["from_action"].__func__
    decoded = []

    def counting(cls, value):
        decoded.append(1)
        return decode(cls, value)

    kwargs = {"motion_workers": 0} if mode == "batched" else {}
    envs = gym.make_vec(ENV_ID, num_envs=2, mode=mode, split="val100", max_steps=3, **kwargs)
    try:
        envs.reset(seed=0)
        batch = envs.action_space.sample()
        batch["skill"][:] = int(SkillCall.walk().skill)
        monkeypatch.setattr(SkillCall, "from_action", classmethod(counting))
        generated = []
        for env in envs.envs:
            motion = env.unwrapped.motion_generator
            monkeypatch.setattr(
                motion,
                "generate",
                lambda call, g=motion.generate: generated.append(call) or g(call),
            )
        envs.step(batch)
    finally:
        envs.close()
    assert len(decoded) == 2  # once per sub-env, by the vector env
    assert [type(call) for call in generated] == [SkillCall, SkillCall]
