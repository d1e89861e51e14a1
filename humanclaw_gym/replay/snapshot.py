"""Single still images of a saved rollout (no physics, no motion): e.g. the final ego view."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["final_ego_frame"]


def final_ego_frame(rollout_dir: str | os.PathLike[str], renderer: str = "auto") -> np.ndarray:
    """Render the ego view of the last realized pose of a saved rollout.

    Uses the hash-verified replay bundle, the scene it names and a renderer only.

    Returns:
        ``uint8 (448, 448, 3)`` RGB image.
    """
    from humanclaw_gym.episodes import load_scene
    from humanclaw_gym.render.cameras import ego_camera
    from humanclaw_gym.replay.bundle import load_bundle
    from humanclaw_gym.replay.render import link_poses_from_frames, make_renderer

    bundle = load_bundle(rollout_dir)
    if len(bundle.realized):
        frame, ids, poses = bundle.realized[-1], bundle.object_ids, bundle.object_poses[-1]
    else:  # stopped before any motion: the pose right after reset
        frame, ids, poses = (
            bundle.initial_realized,
            bundle.initial_object_ids,
            bundle.initial_object_poses,
        )
    scene = load_scene(bundle.scene_id)
    r, _name, _reason = make_renderer(renderer)
    try:
        r.build(scene)
        link_poses = link_poses_from_frames(frame)
        r.set_body_pose(link_poses)
        if len(ids):
            r.set_object_poses([int(i) for i in ids], poses)
        return r.render(ego_camera(link_poses)).rgb
    finally:
        r.close()
