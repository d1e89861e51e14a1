"""Backends and agents are entries of the one registry (``humanclaw_gym.registry``).

* ``backends/registry.py`` keeps its API (``register_physics``, ``entries``, ``resolve``,
  capabilities read from the class) and stores its entries in the one registry; its
  ``register_*`` functions are decorators too, usable where a class is defined.
* ``--agent NAME`` resolves through kind ``agent``: ``register_agent`` in code, or an
  installed package's entry point in ``humanclaw_gym.policies``.
* An installed package's entry points register a physics backend and an agent by name
  (a distribution's metadata on ``sys.path``, read in a fresh interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import humanclaw_gym  # noqa: F401
from humanclaw_gym import registry
from humanclaw_gym.backends import registry as backends
from humanclaw_gym.backends.protocols import PhysicsCapabilities
from humanclaw_gym.evaluation.policies import available_policies, load_policy


def test_backends_are_entries_of_the_one_registry() -> None:
    assert {"pybullet", "mujoco"} <= set(registry.names("physics"))
    assert list(backends.entries("render")) == list(registry.names("render"))
    assert (
        backends.entry("motion", "procedural").target == registry.get("motion", "procedural").where
    )

    @backends.register_physics("decorated_x", description="registered where it is defined")
    class Decorated:
        capabilities = PhysicsCapabilities(name="decorated_x")

    try:
        assert registry.load("physics", "decorated_x") is Decorated
        entry = backends.entry("physics", "decorated_x")
        assert entry.capabilities is Decorated.capabilities and entry.load() is Decorated
        assert entry.description == "registered where it is defined"
    finally:
        registry.unregister("physics", "decorated_x")
    assert "decorated_x" not in backends.entries("physics")


def test_an_agent_registered_in_code_is_an_agent_name() -> None:
    from humanclaw_gym import SkillCall
    from humanclaw_gym.policy import Decision

    @registry.register_agent("turner_x", description="turns left")
    class Turner:
        def __init__(self, seed: int = 0) -> None:
            self.seed = seed

        def reset(self, episode_info):
            pass

        def act(self, observation, info):
            return Decision(SkillCall.turn("left", 30))

    try:
        assert available_policies()["turner_x"].endswith("Turner")
        policy = load_policy("turner_x", seed=4)
        assert isinstance(policy, Turner) and policy.seed == 4
    finally:
        registry.unregister("agent", "turner_x")
    assert "turner_x" not in available_policies()


_MODULE = '''\
import numpy as np
from humanclaw_gym import Decision, SkillCall
from humanclaw_gym.backends.protocols import PhysicsCapabilities
from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics


class RenamedPhysics(PybulletHalfPhysics):
    """pybullet under another name (its keywords: the declaration it inherits)."""

    capabilities = PhysicsCapabilities(name="renamed", part_shapes=frozenset({"box", "cylinder", "sphere"}))


class Turner:
    def reset(self, episode_info):
        pass

    def act(self, observation, info):
        return Decision(SkillCall.turn("left", 30))
'''

_SCRIPT = """
    import json
    import gymnasium as gym
    import humanclaw_gym
    from humanclaw_gym.backends import registry as backends
    from humanclaw_gym.doctor import registered
    from humanclaw_gym.evaluation.policies import load_policy

    entry = backends.entry("physics", "renamed")
    env = gym.make("HumanClawFindNavInteract-v0", split="val100", physics="renamed",
                   physics_options={"solver_iterations": 12}, obs_size=32, max_steps=3)
    env.reset(seed=0)
    _, _, _, _, info = env.step(load_policy("turner").act(None, {}))
    physics = env.unwrapped.simulation.physics
    out = {
        "source": entry.source,
        "target": entry.target,
        "executed": info["executed_skill"],
        "contract": [physics.contract()["backend"], physics.contract()["solver_iterations"]],
        "listed": [[e["name"], e["source"]] for kind in ("physics", "agent")
                   for e in registered()[kind] if e["name"] in ("renamed", "turner")],
    }
    env.close()
    print(json.dumps(out))
"""


def test_entry_points_register_a_backend_and_an_agent(tmp_path: Path) -> None:
    (tmp_path / "myext").mkdir()
    (tmp_path / "myext" / "__init__.py").write_text("")
    (tmp_path / "myext" / "plugins.py").write_text(_MODULE)
    info = tmp_path / "myext-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myext\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[humanclaw_gym.physics]\nrenamed = myext.plugins:RenamedPhysics\n\n"
        "[humanclaw_gym.policies]\nturner = myext.plugins:Turner\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT)],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["source"] == "entry point" and got["target"] == "myext.plugins:RenamedPhysics"
    assert got["executed"] == "Turn<left><30>" and got["contract"] == ["renamed", 12]
    assert got["listed"] == [["renamed", "entry point"], ["turner", "entry point"]]
