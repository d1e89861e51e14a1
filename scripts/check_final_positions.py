"""Where did the agent end up: within reach and sight of a target, or behind a wall?

    python scripts/check_final_positions.py RUN_DIR            # exit 1 if any is not

``RUN_DIR`` is the output of ``humanclaw run ... --episodes val100|val|LIST.json`` on our
embedded split (replay bundles in ``*/rollout_00/``). For every episode this takes the
body's position where it finished approaching: the last realized frame, or, in an episode
with a Sit, the frame before its first Sit (a seated pelvis is over the seat, inside the
object's footprint). It picks the target instance whose box footprint is nearest and asks
the navigation grid (without the body clearance) whether that position lies in the
instance's goal region of that radius plus 0.1 m: a free cell from which a standing body
reaches the box with no fixed geometry in between and sees it from eye height
(:meth:`humanclaw_gym.scenes.navgrid.NavGrid.goal_region`, the rule the approach points of
the episodes are made with). Nothing is simulated.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from humanclaw_gym.episodes import load_scene
from humanclaw_gym.episodes.io import get_episode
from humanclaw_gym.replay import load_bundle
from humanclaw_gym.scenes.navgrid import NavGrid
from humanclaw_gym.skills import Skill

#: Slack on the goal-region radius (m): the final position is at most this much further
#: from the box than the radius it is tested with, i.e. the cell quantisation.
RADIUS_SLACK_M = 0.1


@dataclass
class Args:
    run_dir: tyro.conf.Positional[Path]
    """a ``humanclaw run`` output directory (replay bundles below it)"""
    split: str = "val"
    """the split the episodes come from"""


def approach_position(bundle) -> tuple[np.ndarray, bool]:
    """``(x, z)`` where the body finished approaching, and whether the episode sat."""
    sits = [i for i, s in enumerate(bundle.skill_id) if int(s) == int(Skill.SIT)]
    if sits:
        frame_index = int(bundle.step_start_frame[sits[0]]) - 1
        frame = bundle.initial_realized if frame_index < 0 else bundle.realized[frame_index]
    else:  # an episode that stopped at once has no realized frame: it ends where it began
        frame = bundle.realized[-1] if len(bundle.realized) else bundle.initial_realized
    return np.asarray(frame, dtype=np.float64)[[0, 2]], bool(sits)


def check(run_dir: Path, split: str = "val") -> list[str]:
    """One line per episode whose approach position is outside its nearest target's goal
    region (empty when all are inside). Raises FileNotFoundError without bundles."""
    dirs = sorted(p.parent for p in Path(run_dir).glob("*/rollout_*/replay_manifest.json"))
    if not dirs:
        raise FileNotFoundError(f"{run_dir}: no replay bundles (*/rollout_*/replay_manifest.json)")
    grids: dict[str, NavGrid] = {}
    failures = []
    for directory in dirs:
        bundle = load_bundle(directory)
        episode = get_episode(split, bundle.episode_id)
        xz, sat = approach_position(bundle)
        grid = grids.get(bundle.scene_id)
        if grid is None:
            grid = grids[bundle.scene_id] = NavGrid.from_scene(
                load_scene(bundle.scene_id), clearance_m=0.0
            )
        dist, goal = min(
            (
                float(
                    np.linalg.norm(
                        np.clip(xz, np.asarray(g.aabb_min)[[0, 2]], np.asarray(g.aabb_max)[[0, 2]])
                        - xz
                    )
                ),
                g,
            )
            for g in episode.goals
        )
        iz, ix = grid.world_to_cell(float(xz[0]), float(xz[1]))
        nz, nx = grid.shape
        inside = 0 <= iz < nz and 0 <= ix < nx
        region = grid.goal_region(int(goal.object_id), dist + RADIUS_SLACK_M)
        if not (inside and region[iz, ix]):
            failures.append(
                f"{bundle.episode_id}: {'before sitting ' if sat else ''}at x={xz[0]:.2f} "
                f"z={xz[1]:.2f}, {dist:.2f} m from {goal.object_name or goal.object_id}, "
                "not within reach and sight of it"
            )
    return failures


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv)
    failures = check(args.run_dir, args.split)
    for line in failures:
        print(line)
    n = len(list(Path(args.run_dir).glob("*/rollout_*/replay_manifest.json")))
    print(f"{n} episodes, {len(failures)} approach positions outside reach and sight of a target")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
