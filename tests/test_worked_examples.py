"""The worked examples of docs/architecture.md whose code is printed there, performed as
printed: each ``<!-- example: NAME -->`` code block is written as ``NAME`` into a temporary
package on ``sys.path`` (outside ``humanclaw_gym``), and a fresh interpreter imports it and
uses the thing it registers.

* "Add a skill": ``Wave<left|right>`` with its procedural planner: the env executes it (the
  wrist goes above the head and swings sideways, the body stands), the flow generator
  refuses it at its step and runs the built-in skills, and the prompts, random agent,
  server spec and doctor list it. No id or count is written.
* "Add a physics backend": ``KinematicPhysics`` registered where it is defined, its
  keywords declared once: the env runs on it with its own option, refuses an unknown one,
  records the option in the replay manifest and replays the rollout exactly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _example(name: str) -> str:
    """The code block printed after ``<!-- example: name -->`` in docs/architecture.md."""
    text = _DOC.read_text()
    match = re.search(
        rf"^( *)<!-- example: {re.escape(name)} -->\n\1```python\n(.*?)\n\1```$",
        text,
        re.DOTALL | re.MULTILINE,
    )
    assert match, f"docs/architecture.md has no example {name!r}"
    return textwrap.dedent(match.group(2).replace("\n" + match.group(1), "\n")).strip() + "\n"


def _package(tmp_path: Path, name: str) -> Path:
    """``mypkg`` under ``tmp_path`` holding the example ``name``; returns the sys.path root."""
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / name).write_text(_example(name))
    return tmp_path


def _run(root: Path, script: str, cwd: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, timeout=900, env=env, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


SKILL_SCRIPT = """
    import json

    import gymnasium as gym
    import numpy as np

    import humanclaw_gym
    from humanclaw_gym.skills import NUM_SKILLS, Skill, SkillNotExecutableError

    n_before = len(Skill)
    from mypkg.wave_skill import WAVE  # registers the skill and its planner

    out = {"id_is_next": int(WAVE) == n_before == NUM_SKILLS, "count": len(Skill) - n_before}
    env = gym.make("HumanClawFindNavInteract-v0", split="val100", privileged=True,
                   obs_size=32, max_steps=5)
    from humanclaw_gym.body.skeleton import JOINT_INDEX, forward_kinematics, heading_yaw

    heights, lateral = [], []

    class _Frames:  # the realized (post-physics) pose of every frame
        def on_frame(self, event):
            points, _ = forward_kinematics(event.realized)
            wrist, head = points[JOINT_INDEX["left_wrist"]], points[JOINT_INDEX["head"]]
            yaw = float(heading_yaw(event.realized[3:6]))  # the body's left: (cos, 0, -sin)
            offset = wrist - points[0]
            heights.append(float(wrist[1] - head[1]))
            lateral.append(float(offset[0] * np.cos(yaw) - offset[2] * np.sin(yaw)))

    env.unwrapped.add_observer(_Frames())
    env.reset(seed=0)
    start = env.unwrapped.privileged_state()
    _, _, terminated, _, info = env.step("Wave<left>")
    end = env.unwrapped.privileged_state()
    env.close()
    up = [x for h, x in zip(heights, lateral) if h > 0]
    out.update(
        executed=info["executed_skill"],
        above_head_frames=sum(h > 0 for h in heights),
        swing_m=max(up) - min(up) if up else 0.0,
        moved_m=float(np.linalg.norm(end.root_xz - start.root_xz)),
    )
    # a generator without the skill's motion: made, runs the rest, refuses it at its step
    env = gym.make("HumanClawFindNavInteract-v0", split="val100", motion="flow",
                   motion_options={"steps": 2}, obs_size=32, max_steps=5)
    env.reset(seed=0)
    env.step("Walk<forward><slow>")
    try:
        env.step("Wave<right>")
        out["refused"] = None
    except SkillNotExecutableError as exc:
        out["refused"] = str(exc)
    out["flow_after"] = env.step("Turn<left><30>")[4]["executed_skill"]
    env.close()
    # what lists the skills
    from humanclaw_agents.prompts import action_space_text, skill_table
    from humanclaw_agents.random_policy import RandomPolicy
    from humanclaw_gym.doctor import registered
    from humanclaw_gym.server.protocol import action_spec, benchmark_protocol

    policy = RandomPolicy(seed=0)
    policy.reset({"scene_id": "s", "episode_id": "e"})
    out.update(
        prompt_row=skill_table().splitlines()[-1],
        prompt_v2=f"action id {int(WAVE)}: Wave<direction>" in action_space_text(),
        random=any(policy.act(None, {}).action.skill is WAVE for _ in range(300)),
        server=action_spec()["skills"][-1]["key"],
        protocol=benchmark_protocol(),
        doctor=registered()["skill"][-1]["name"],
    )
    print(json.dumps(out))
"""


def test_the_skill_example_runs_from_a_package_of_your_own(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    root = _package(tmp_path, "wave_skill.py")
    got = _run(root, SKILL_SCRIPT, tmp_path)
    assert got["id_is_next"] and got["count"] == 1
    assert got["executed"] == "Wave<left>"
    assert got["above_head_frames"] >= 8  # the realized wrist, after physics
    assert got["swing_m"] > 0.1 and got["moved_m"] < 0.05
    assert "Wave<right>" in got["refused"] and "'flow'" in got["refused"]
    assert got["flow_after"] == "Turn<left><30>"
    assert got["prompt_row"].endswith("| Wave | Wave<left|right> | wave one hand above the "
                                      "head, standing")  # fmt: skip
    assert got["prompt_v2"] and got["random"]
    assert got["server"] == "wave" and got["protocol"].endswith("+wave/v1")
    assert got["doctor"] == "wave"


PHYSICS_SCRIPT = """
    import json, sys
    from pathlib import Path

    import gymnasium as gym
    import numpy as np

    import humanclaw_gym
    import mypkg.kinematic_physics  # registers "kinematic" where the class is defined
    from humanclaw_gym.replay import forward_replay, load_bundle
    from humanclaw_gym.wrappers import TrajectoryWrapper

    out = {}
    try:
        gym.make("HumanClawFindNavInteract-v0", split="val100", physics="kinematic",
                 physics_options={"stiffness": 1})
        out["refused"] = None
    except ValueError as exc:
        out["refused"] = str(exc)
    try:
        gym.make("HumanClawFindNavInteract-v0", split="val100", physics="kinematic",
                 physics_options={"lag": 2.0}).reset(seed=0)
        out["bad_lag"] = None
    except ValueError as exc:
        out["bad_lag"] = str(exc)
    env = TrajectoryWrapper(
        gym.make("HumanClawFindNavInteract-v0", split="val100", physics="kinematic",
                 physics_options={"lag": 0.5}, privileged=True, obs_size=32, max_steps=4),
        Path(sys.argv[1]),
    )
    env.reset(seed=0)
    start = env.unwrapped.privileged_state().root_xz
    env.step("Walk<forward><normal>")
    moved = float(np.linalg.norm(env.unwrapped.privileged_state().root_xz - start))
    env.step("Stop/Stand")
    env.close()
    manifest = load_bundle(env.last_bundle_dir).manifest
    report = forward_replay(env.last_bundle_dir)
    out.update(
        moved_m=moved,
        backend=manifest["physics"]["backend"],
        lag=manifest["physics"]["lag"],
        solver_iterations=manifest["physics"]["solver_iterations"],
        exact=report.exact,
        contract_matches=report.contract_matches,
        listed=[e["name"] for e in humanclaw_gym.registry.describe()["physics"]],
    )
    print(json.dumps(out))
"""


def test_the_physics_backend_example_runs_from_a_package_of_your_own(tmp_path: Path) -> None:
    root = _package(tmp_path, "kinematic_physics.py")
    script = PHYSICS_SCRIPT.replace("sys.argv[1]", repr(str(tmp_path / "out")))
    got = _run(root, script, tmp_path)
    assert got["refused"] and "['stiffness'] are not accepted" in got["refused"]
    assert "'lag'" in got["refused"]  # the declared keywords are named
    assert got["bad_lag"] and "lag must be in [0, 1)" in got["bad_lag"]
    assert 0.1 < got["moved_m"] < 0.4  # it lags behind the generated 0.4 m
    assert got["backend"] == "kinematic" and got["lag"] == 0.5 and got["solver_iterations"] == 1
    assert got["exact"] is True and got["contract_matches"] is True
    assert "kinematic" in got["listed"]
