"""Regenerate the shipped image-goal split ``imagegoal_val100`` (byte-identical on every run).

Writes, under ``humanclaw_gym/assets/`` (or ``--out-dir``):

* ``splits/imagegoal_val100/<scene_id>.json.gz``: 20 episodes in each of the five homes
  of ``val100``;
* ``splits/imagegoal_val100/index.json``: counts, generator settings, shard hashes.

Every goal view is rendered with the env's own simulation as the task renders it at reset
(pybullet, procedural motion; the body placed at the start, the goal view drawn with
``Simulation.render_at``), by each of the renderers (default both built-in ones,
``moderngl`` and ``tiny``), and must pass the goal-view check
(``humanclaw_gym.episodes.goal_view``) with the generator's margin. See
``humanclaw_gym.episodes.imagegoal_generate`` for how episodes are drawn.

Usage::

    python scripts/generate_imagegoal_split.py            # rewrite the shipped split
    python scripts/generate_imagegoal_split.py --check    # regenerate, compare bytes
"""

from __future__ import annotations

import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from humanclaw_gym.backends.config import BackendConfig
from humanclaw_gym.envs.simulation import Simulation
from humanclaw_gym.episodes.generate import write_files
from humanclaw_gym.episodes.imagegoal_generate import IMAGEGOAL_SPLIT_NAME, build_imagegoal_files
from humanclaw_gym.episodes.io import assets_dir
from humanclaw_gym.image_sizes import EGO_SIZE_PX


@dataclass
class Args:
    """Regenerate the shipped image-goal split."""

    out_dir: Path | None = None
    """Root to write into (default: the package's assets directory)."""
    check: bool = False
    """Regenerate into a temporary directory and compare every byte with --out-dir."""
    renderers: tuple[str, ...] = ("moderngl", "tiny")
    """Renderers a goal view must pass the check in (the shipped split: both built-in
    ones, so that it holds on machines without EGL too)."""
    quiet: bool = False
    """Print only the summary."""


def make_render_view(renderer: str):
    """A ``render_view`` for the generator: the env's simulation, one home at a time."""
    sim = Simulation(BackendConfig(renderer=renderer).check())
    sim.resolve({"rgb", "depth", "instance"}, False, EGO_SIZE_PX)

    def render_view(scene, start, start_yaw, goal, goal_yaw, episode_id):
        # what the task does at reset: the body placed at the start, the goal view drawn
        sim.load_scene(scene.scene_id)
        seed = zlib.crc32(f"{scene.scene_id}/{episode_id}".encode())  # the episode's seed
        sim.reset(np.asarray(start, dtype=np.float64), start_yaw, seed=seed)
        modes = ("rgb", "depth", "instance")
        view = sim.render_at(
            np.asarray(goal, dtype=np.float64), goal_yaw, "ego", EGO_SIZE_PX, modes
        )
        return {mode: np.array(image, copy=True) for mode, image in view.items()}

    return sim, render_view


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="generate_imagegoal_split.py")
    root = (args.out_dir or assets_dir()).resolve()
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, flush=True))
    t0 = time.perf_counter()
    made = [make_render_view(name) for name in args.renderers]
    try:
        views = [render_view for _, render_view in made]
        built = build_imagegoal_files(views, progress=log, view_renderers=args.renderers)
    finally:
        for sim, _ in made:
            sim.close()
    elapsed = time.perf_counter() - t0
    if args.check:
        with tempfile.TemporaryDirectory(prefix="hc_imagegoal_") as tmp:
            write_files(built.files, tmp)
            problems = []
            for rel in sorted(built.files):
                path = root / rel
                if not path.is_file():
                    problems.append(f"missing: {rel}")
                elif path.read_bytes() != (Path(tmp) / rel).read_bytes():
                    problems.append(f"differs: {rel}")
            folder = root / "splits" / IMAGEGOAL_SPLIT_NAME
            for path in sorted(folder.glob("*.json*")) if folder.is_dir() else []:
                rel = path.relative_to(root).as_posix()
                if rel not in built.files:
                    problems.append(f"unexpected: {rel}")
        if problems:
            print(f"check FAILED against {root}: {len(problems)} problem(s)", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 1
        print(f"check OK: {len(built.files)} files byte-identical under {root} ({elapsed:.1f} s)")
        return 0
    write_files(built.files, root)
    print(
        f"wrote {len(built.files)} files under {root / 'splits' / IMAGEGOAL_SPLIT_NAME}: "
        f"{len(built.episodes)} episodes, {elapsed:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
