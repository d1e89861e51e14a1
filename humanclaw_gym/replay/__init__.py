"""Replay bundles: hash-checked IO, delayed render (no physics) and forward replay.

* :func:`load_bundle` / :class:`ReplayBundle`: read and verify the three files a
  :class:`~humanclaw_gym.wrappers.TrajectoryWrapper` writes per episode.
* :func:`render_saved_trajectory` / :func:`render_saved_batch`: restore the saved poses
  frame by frame and rasterize ego/exo MP4 videos, without stepping any physics.
* :func:`forward_replay`: re-execute the saved generated motion in a fresh physics backend
  and report the deviation from the recorded realized trajectory (0.0 = exact).

The schema of every array is in ``docs/replay.md``. Importing this package loads no
simulator or renderer.
"""

from __future__ import annotations

from humanclaw_gym.replay.bundle import (
    AFTER_FILE,
    BEFORE_FILE,
    DEFAULT_PHYSICS_CONTRACT,
    MANIFEST_FILE,
    REPLAY_SCHEMA,
    ReplayBundle,
    ReplayBundleError,
    ReplayIntegrityError,
    load_bundle,
    write_bundle,
)
from humanclaw_gym.replay.forward import ForwardReplayReport, forward_replay
from humanclaw_gym.replay.layout import flat_dir, per_episode_dir
from humanclaw_gym.replay.mp4 import Mp4Stream, count_mp4_frames
from humanclaw_gym.replay.render import (
    BatchJobResult,
    RenderReport,
    find_rollout_dirs,
    link_poses_from_frames,
    render_saved_batch,
    render_saved_trajectory,
)
from humanclaw_gym.replay.snapshot import final_ego_frame

__all__ = [
    "AFTER_FILE",
    "BEFORE_FILE",
    "DEFAULT_PHYSICS_CONTRACT",
    "MANIFEST_FILE",
    "REPLAY_SCHEMA",
    "BatchJobResult",
    "ForwardReplayReport",
    "Mp4Stream",
    "RenderReport",
    "ReplayBundle",
    "ReplayBundleError",
    "ReplayIntegrityError",
    "count_mp4_frames",
    "final_ego_frame",
    "find_rollout_dirs",
    "flat_dir",
    "forward_replay",
    "link_poses_from_frames",
    "load_bundle",
    "per_episode_dir",
    "render_saved_batch",
    "render_saved_trajectory",
    "write_bundle",
]
