"""The library-side recipes of docs/architecture.md, performed as written in a temporary copy
of the package, from outside it (a fresh interpreter whose ``humanclaw_gym`` is the copy).

* "Add a skill" inside the library: a ``SkillSpec`` (no id: the table gives the next)
  appended to ``_BUILTIN_SPECS`` with its ``ClassVar`` line (and its new action-space entry
  in ``_ACTION_FIELDS``) in ``skills/catalog.py``, a planner under its ``motion_key`` in
  ``motion/procedural.py``; then the default (procedural) generator, whose capabilities
  come from its planner table, runs the skill. No id or count is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import humanclaw_gym

_PACKAGE = Path(humanclaw_gym.__file__).resolve().parent


def _copy_package(tmp_path: Path) -> Path:
    """A copy of the installed package under ``tmp_path`` (caches left out)."""
    target = tmp_path / "humanclaw_gym"
    shutil.copytree(_PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _edit(path: Path, anchor: str, addition: str) -> None:
    """Insert ``addition`` right after the one occurrence of ``anchor`` in ``path``."""
    text = path.read_text()
    assert text.count(anchor) == 1, f"{path.name}: the recipe's anchor {anchor!r} moved"
    path.write_text(text.replace(anchor, anchor + addition))


def _run(root: Path, script: str) -> str:
    """Run ``script`` with the copy first on the path; return its stdout."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


_CROUCH_SPEC = """
    SkillSpec(
        name="CROUCH",
        display_name="Crouch",
        text_name="Crouch",
        slots=("height_m",),
        params={"height_m": Range(0.3, 0.6, default=0.45, unit="m")},
        action_keys={"height_m": "crouch_height_m"},
        aliases=("crouch",),
        meaning="lower the pelvis to this height above the floor, feet in place",
        example="Crouch<0.45>",
        motion_key="crouch",
        condition=lambda p: {"height_m": p["height_m"]},
    ),"""


def test_the_add_a_skill_recipe_works_as_documented(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    catalog = package / "skills" / "catalog.py"
    # 1. skills/catalog.py: the spec at the end of _BUILTIN_SPECS and its ClassVar line
    _edit(catalog, '        condition=lambda p: {"stair_steps": -1.0},\n    ),', _CROUCH_SPEC)
    _edit(catalog, "    CLIMB_DOWN: ClassVar[Skill]\n", "    CROUCH: ClassVar[Skill]\n")
    # ... and, as it reads a new action-space entry, an ActionField in _ACTION_FIELDS
    _edit(
        catalog,
        '    ActionField("height_m", Range(*SIT_HEIGHT_RANGE_M, unit="m"), SIT_DEFAULT_HEIGHT_M),\n',
        '    ActionField("crouch_height_m", Range(0.3, 0.6, unit="m"), 0.45),\n',
    )
    # 2. motion/procedural.py: a planner under the new motion_key in _PLANNERS
    _edit(
        package / "motion" / "procedural.py",
        "_PLANNERS: dict[str, Any] = {\n",
        '    "crouch": lambda g, start, c: g._plan_sit(start, c["height_m"]),\n',
    )
    script = """
        import gymnasium as gym
        import numpy as np

        import humanclaw_gym
        from humanclaw_gym.skills import NUM_SKILLS, Skill, SkillCall, action_space

        assert humanclaw_gym.__file__.startswith(PACKAGE), humanclaw_gym.__file__
        # the last entry of the table, given the next id; the built-in count follows
        assert int(Skill.CROUCH) == len(Skill) - 1 == NUM_SKILLS - 1
        assert str(SkillCall.parse("crouch<0.4>")) == "Crouch<0.4>"
        space = action_space()
        assert space["skill"].n == len(Skill) and "crouch_height_m" in space.spaces
        action = {**space.sample(), "skill": int(Skill.CROUCH), "crouch_height_m": [0.5]}
        call = SkillCall.from_action(action)
        assert call == SkillCall.parse("Crouch<0.5>")
        env = gym.make("HumanClawFindNavInteract-v0", split="val100", privileged=True,
                       obs_size=32, max_steps=3)
        env.reset(seed=0)
        before = env.unwrapped.privileged_state().realized_frame
        _, _, terminated, _, info = env.step("Crouch<0.35>")
        after = env.unwrapped.privileged_state().realized_frame
        assert info["executed_skill"] == "Crouch<0.35>" and not terminated
        print("pelvis_drop_m", before[1] - after[1])
        env.close()
        """
    out = _run(tmp_path, script.replace("PACKAGE", repr(str(package))))
    drop = float(out.split("pelvis_drop_m")[1])
    assert drop > 0.2  # the body went down towards the crouch height
