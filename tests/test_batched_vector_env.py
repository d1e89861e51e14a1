"""The natively batched vector env (humanclaw_gym/envs/batched.py): N sub-envs stepped
together on threads give exactly what N single envs give with the same shards, seeds and
actions; autoreset, the action forms, calls on the sub-envs' threads, errors."""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import SkillCall
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.envs.batched import BatchedVectorEnv
from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

pytest.importorskip("mujoco")

# per step, one action per sub-env: different skills so the sub-envs diverge
_ACTIONS = [
    ["Walk<forward><normal>", "Turn<left><30>", "Side step<right><0.3>"],
    ["Turn<right><45>", "Walk<forward><fast>", "Walk<forward><slow>"],
    ["Walk<forward><slow>", "Step back<0.2>", "Turn<left><90>"],
    ["Stop/Stand", "Walk<forward><normal>", "Walk<forward><normal>"],
    ["Walk<forward><normal>", "Turn<left><10>", "Stop/Stand"],
]


def _kwargs() -> dict:
    return {"split": "val100", "max_steps": 4, "physics": "mujoco", "privileged": True}


@pytest.mark.parametrize("motion_workers", [2, 0])
def test_batched_env_equals_single_envs_bit_for_bit(motion_workers):
    n = 3
    envs = gym.make_vec(
        ENV_ID,
        num_envs=n,
        vectorization_mode="vector_entry_point",
        mode="batched",
        motion_workers=motion_workers,
        **_kwargs(),
    )
    singles = [FindNavInteractEnv(num_shards=n, shard_index=i, **_kwargs()) for i in range(n)]
    try:
        assert isinstance(envs, BatchedVectorEnv)
        obs, infos = envs.reset(seed=0)
        single_obs = [s.reset(seed=i)[0] for i, s in enumerate(singles)]
        for i in range(n):
            assert np.array_equal(obs[i], single_obs[i])
            assert infos["episode_id"][i] == singles[i].current_episode_id
        done = [False] * n
        for step_actions in _ACTIONS:
            obs, rew, term, trunc, infos = envs.step(step_actions)
            for i, env in enumerate(singles):
                if done[i]:  # NEXT_STEP: the vector env resets this sub-env now
                    o, info = env.reset()
                    t = tr = False
                else:
                    o, _, t, tr, info = env.step(step_actions[i])
                assert np.array_equal(obs[i], o), f"sub-env {i} image differs"
                assert (term[i], trunc[i]) == (t, tr)
                assert infos["episode_id"][i] == info["episode_id"]
                assert infos["step"][i] == info["step"]
                vec_state = envs.envs[i].unwrapped.privileged_state()
                one_state = env.privileged_state()
                assert np.array_equal(vec_state.realized_frame, one_state.realized_frame)
                assert np.array_equal(vec_state.object_poses, one_state.object_poses)
                done[i] = bool(t or tr)
    finally:
        envs.close()
        for s in singles:
            s.close()


def test_batched_env_runs_each_sub_env_on_its_own_thread():
    envs = gym.make_vec(ENV_ID, num_envs=2, mode="batched", max_concurrent=1, **_kwargs())
    try:
        envs.reset(seed=3)
        # the batched Gymnasium encoding works as for the sync vector env
        one = SkillCall.walk("slow").to_action()
        batched = {k: np.stack([np.asarray(v)] * 2) for k, v in one.items()}
        _, _, _, _, infos = envs.step(batched)
        assert (infos["step"] == 1).all()
        names = envs.call("__class__")  # an attribute read on each sub-env's thread
        assert len(names) == 2
        threads = [envs._threads[i].submit(threading.current_thread).result() for i in range(2)]
        assert threads[0] is not threads[1]
        assert all(t.name.startswith(f"humanclaw-env{i}") for i, t in enumerate(threads))
        assert envs.max_concurrent == 1
    finally:
        envs.close()
    envs.close()  # idempotent


def test_procedural_chunks_come_from_the_worker_processes(monkeypatch):
    envs = gym.make_vec(ENV_ID, num_envs=2, mode="batched", motion_workers=2, **_kwargs())
    try:
        envs.reset(seed=0)
        assert envs.motion_workers == 2
        from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

        # computing a chunk in this process would fail; the spawned workers are unaffected
        monkeypatch.setattr(
            ProceduralMotionGenerator, "_pose_chunk", lambda *a, **k: pytest.fail("computed here")
        )
        _, _, _, _, infos = envs.step(["Walk<forward><slow>", "Turn<left><20>"])
        assert (infos["step"] == 1).all()
        assert envs._motion_pool is not None
    finally:
        envs.close()
    assert envs._motion_pool is None  # the workers were stopped


def test_batched_env_errors_are_clear():
    with pytest.raises(ValueError, match="max_concurrent must be an int >= 1"):
        BatchedVectorEnv([lambda: FindNavInteractEnv(**_kwargs())], max_concurrent=0)
    with pytest.raises(ValueError, match="max_concurrent is an option of mode='batched'"):
        gym.make_vec(ENV_ID, num_envs=1, mode="sync", max_concurrent=2, **_kwargs())
    with pytest.raises(ValueError, match="motion_workers must be an int >= 0, got -1"):
        BatchedVectorEnv([lambda: FindNavInteractEnv(**_kwargs())], motion_workers=-1)
    with pytest.raises(ValueError, match="motion_workers is an option of mode='batched'"):
        gym.make_vec(ENV_ID, num_envs=1, mode="async", motion_workers=2, **_kwargs())
    envs = gym.make_vec(ENV_ID, num_envs=2, mode="batched", **_kwargs())
    try:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match="a sequence of 2 single actions"):
            envs.step(["Walk<forward><slow>"])
        from humanclaw_gym.skills import SkillCallError

        with pytest.raises(SkillCallError, match="sub-env 1: .*Fly"):
            envs.step(["Walk<forward><slow>", "Fly<up>"])
        # nothing stepped: the next valid step is each sub-env's first
        _, _, _, _, infos = envs.step(["Walk<forward><slow>", "Turn<left><20>"])
        assert (infos["step"] == 1).all()
    finally:
        envs.close()


_NO_MAIN_GUARD = """
import gymnasium as gym
import humanclaw_gym
envs = gym.make_vec("HumanClawFindNavInteract-v0", num_envs=2, mode="batched", motion_workers=2,
                    split="val100", max_steps=4, physics="mujoco")
envs.reset(seed=0)
_, _, _, _, infos = envs.step(["Walk<forward><slow>", "Turn<left><20>"])
envs.close()
print("steps", [int(s) for s in infos["step"]])
"""


def test_a_script_without_a_main_guard_runs_the_batched_env(tmp_path):
    """The motion workers are fresh interpreters that never import the caller's script
    (multiprocessing's spawn would, and run it again)."""
    import subprocess
    import sys

    script = tmp_path / "plain.py"
    script.write_text(_NO_MAIN_GUARD)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "steps [1, 1]"
