"""A synthetic checkout of the reference release for the paper profile's tests (no file of
the release exists in the repository).

:func:`write_release_checkout` writes the files :func:`humanclaw_gym.profiles.resolve_profile`
reads from a release checkout, in the release's layout:

* ``configs/paper_fullval_v1.json``: the profile (``humanclaw_release_profile_v1``) with
  the paper's published physics values (HUMANCLAW facts: PJSC gains by link, friction 0.4,
  midpoint root gravity, 4 substeps, x/z commands on substeps 0 and 2);
* ``src/humanclaw_bench/envs/half_physics/humanclaw.physics_config.json``: the simulator
  config (timestep 1/120 s, gravity -9.8, scene friction 1.0, restitution 0, margin 0.01);
* ``resources/agent/neutral_beta0_handmerged/``: a synthetic body
  (:func:`humanclaw_gym.body.synthetic.write_synthetic_body_asset`);
* ``resources/benchmark/episodes/val/`` (header + ``content/``) and
  ``resources/benchmark/val100.json`` (a ``humanclaw_episode_subset_v1`` file): the episodes
  of a synthetic scene dataset (:mod:`humanclaw_gym.scenes.hssd.synthetic`), or none.

The motion weights and the manifest come from
``humanclaw_gym.motion.paper.synthetic.write_synthetic_release`` into the same root.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from humanclaw_gym.body.synthetic import write_synthetic_body_asset

__all__ = ["PAPER_PHYSICS", "write_release_checkout"]

#: The physics section of the paper profile (published values).
PAPER_PHYSICS: dict[str, Any] = {
    "backend": "hp",
    "agent_urdf": "resources/agent/neutral_beta0_handmerged/neutral_beta0_handmerged.urdf",
    "agent_shift_npy": "resources/agent/neutral_beta0_handmerged/shift.npy",
    "physics_config": "src/humanclaw_bench/envs/half_physics/humanclaw.physics_config.json",
    "fps": 30.0,
    "root_gravity_scale": 1.0,
    "root_gravity_mode": "midpoint",
    "inherit_downward_root_y_velocity": True,
    "pjsc_lambda": 1.0,
    "pjsc_lambda_by_link": {
        "left_ankle": 0.1,
        "right_ankle": 0.1,
        "left_shoulder": 0.03,
        "right_shoulder": 0.03,
        "left_wrist": 0.1,
        "right_wrist": 0.1,
    },
    "pjsc_substeps": 4,
    "root_linear_xz_command_substeps": [0, 2],
    "friction": 0.4,
}
SIMULATOR: dict[str, Any] = {
    "physics_simulator": "bullet",
    "timestep": 0.0083333333,
    "gravity": [0.0, -9.8, 0.0],
    "friction_coefficient": 1.0,
    "default_collision_margin": 0.01,
    "restitution_coefficient": 0.0,
}


def write_release_checkout(
    root: Path,
    *,
    episodes_dir: Path | None = None,
    physics: Mapping[str, Any] | None = None,
    body: bool = True,
) -> Path:
    """Write the checkout files (see the module docstring) and return ``root``.

    Args:
        root: the checkout folder (created).
        episodes_dir: a reference-format split folder (header + ``content/``) to ship as
            the release's ``val`` split, all of its episodes listed in ``val100.json``;
            None writes no episodes.
        physics: entries replacing those of :data:`PAPER_PHYSICS`.
        body: write the body folder.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "configs").mkdir(exist_ok=True)
    profile = {
        "schema": "humanclaw_release_profile_v1",
        "profile": "paper_fullval_v1",
        "benchmark": {"split": "val", "max_steps": 100, "instruction_version": "v1"},
        "physics": {**PAPER_PHYSICS, **dict(physics or {})},
    }
    (root / "configs" / "paper_fullval_v1.json").write_text(json.dumps(profile, indent=2))
    sim = root / "src/humanclaw_bench/envs/half_physics/humanclaw.physics_config.json"
    sim.parent.mkdir(parents=True, exist_ok=True)
    sim.write_text(json.dumps(SIMULATOR, indent=2))
    if body:
        write_synthetic_body_asset(
            root / "resources/agent/neutral_beta0_handmerged", name="neutral_beta0_handmerged"
        )
    if episodes_dir is not None:
        from humanclaw_gym.episodes.io import load_split

        target = root / "resources/benchmark/episodes/val"
        shutil.copytree(episodes_dir, target)
        rows = [
            {
                "scene_id": e.scene_id,
                "episode_id": e.episode_id,
                "object_category": e.object_category,
            }
            for e in load_split(target)
        ]
        subset = {
            "schema": "humanclaw_episode_subset_v1",
            "name": "val100",
            "split": "val",
            "n_episodes": len(rows),
            "episodes": rows,
        }
        (root / "resources/benchmark/val100.json").write_text(json.dumps(subset, indent=2))
    return root
