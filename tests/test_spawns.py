"""Spawns: room for the whole standing body (no reset-time penetration) and a view ahead."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from humanclaw_gym.body.skeleton import (
    EYE_OFFSET_IN_HEAD_M,
    JOINT_INDEX,
    forward_kinematics,
    link_shapes,
)
from humanclaw_gym.episodes import load_scene, load_split
from humanclaw_gym.episodes.spawns import (
    EYE_FORWARD_M,
    SPAWN_BODY_RADIUS_M,
    SPAWN_BODY_TOP_M,
    SPAWN_FOOT_RADIUS_M,
    SpawnChecker,
)
from humanclaw_gym.metrics.thresholds import INITIAL_PENETRATION_FLAG_M
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
from humanclaw_gym.scenes.navgrid import EYE_HEIGHT_M, NavGrid
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec

_FEET = {JOINT_INDEX[f"{s}_{j}"] for s in ("left", "right") for j in ("ankle", "foot")}


def _quat_matrix(q) -> np.ndarray:
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _standing_extents(seed: int) -> dict[str, float]:
    """Horizontal reach (from the pelvis axis) of every collision shape of the spawn pose."""
    frame = np.asarray(ProceduralMotionGenerator().reset(np.zeros(3), 0.0, seed=seed))[-1]
    pos, rot = forward_kinematics(frame[None])
    pos, rot = pos[0], rot[0]
    root = frame[[0, 2]]
    body = feet = top = 0.0
    for s in link_shapes():
        r_link = rot[s.joint]
        centre = pos[s.joint] + r_link @ np.asarray(s.offset_m)
        r_shape = r_link @ _quat_matrix(s.quat_xyzw)
        if s.kind == "capsule":
            axis = r_shape @ np.array([0.0, 0.0, s.half_length])
            pts, pad = np.stack([centre - axis, centre + axis]), s.radius
        elif s.kind == "sphere":
            pts, pad = centre[None], s.radius
        else:
            signs = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)])
            pts, pad = centre + (signs * np.asarray(s.half_extents)) @ r_shape.T, 0.0
        reach = float(np.max(np.hypot(pts[:, 0] - root[0], pts[:, 2] - root[1]))) + pad
        top = max(top, float(np.max(pts[:, 1])) + pad)
        if s.joint in _FEET:
            feet = max(feet, reach)
        body = max(body, reach)
    h = JOINT_INDEX["head"]
    eye = pos[h] + rot[h] @ np.asarray(EYE_OFFSET_IN_HEAD_M)
    return {"body": body, "feet": feet, "top": top, "eye_y": eye[1], "eye_fwd": eye[2]}


def test_spawn_clearances_cover_the_standing_body() -> None:
    """The constants of the spawn rule bound the body model's standing pose (every style
    seed of the procedural generator, whose pose the flow generator also starts from)."""
    ext = [_standing_extents(seed) for seed in range(0, 1000, 9)]
    body = max(e["body"] for e in ext)
    feet = max(e["feet"] for e in ext)
    assert 0.25 < body <= SPAWN_BODY_RADIUS_M - 0.02, body
    assert feet <= SPAWN_FOOT_RADIUS_M - 0.02, feet
    assert max(e["top"] for e in ext) < SPAWN_BODY_TOP_M
    for e in ext:
        assert e["eye_y"] == pytest.approx(EYE_HEIGHT_M, abs=0.03)
        assert e["eye_fwd"] == pytest.approx(EYE_FORWARD_M, abs=0.03)


def _room_with(objects: list[SceneObject]) -> SceneSpec:
    walls = []
    for oid, (x0, z0, x1, z1) in enumerate(
        ((0, 0, 4, 0.05), (0, 2.95, 4, 3), (0, 0.05, 0.05, 2.95), (3.95, 0.05, 4, 2.95)), 1
    ):
        walls.append(
            SceneObject(
                oid, f"wall_{oid}", "wall", ((x0 + x1) / 2, 0.0, (z0 + z1) / 2), 0.0,
                (Part("box", ((x1 - x0) / 2, 1.25, (z1 - z0) / 2), (0.0, 1.25, 0.0)),),
            )
        )  # fmt: skip
    room = Room(0, "living_room", (0.0, 0.0), (4.0, 3.0))
    return SceneSpec("spawn_room", (room,), tuple(walls + objects))


def test_spawn_checker_rules() -> None:
    ball = SceneObject(
        10, "ball_1", "ball", (1.0, 0.0, 1.5), 0.0, (Part("sphere", (0.1, 0, 0), (0, 0.1, 0)),),
        dynamic=True, mass_kg=0.3,
    )  # fmt: skip
    rug = SceneObject(
        11, "rug_1", "rug", (3.0, 0.0, 1.5), 0.0, (Part("box", (0.3, 0.005, 0.3), (0, 0.005, 0)),)
    )  # fmt: skip
    scene = _room_with([ball, rug])
    chk = SpawnChecker(scene, NavGrid.from_scene(scene))
    # a movable ball counts: the body's hands would be in it
    assert not chk.is_clear(1.0 + 0.1 + SPAWN_BODY_RADIUS_M - 0.01, 1.5)
    assert chk.is_clear(1.0 + 0.1 + SPAWN_BODY_RADIUS_M + 0.01, 1.5)
    # a rug only needs the feet off it
    assert not chk.is_clear(3.0 - 0.3 - SPAWN_FOOT_RADIUS_M + 0.01, 1.5)
    assert chk.is_clear(3.0 - 0.3 - SPAWN_FOOT_RADIUS_M - 0.01, 1.5)
    # walls: the hands hang out further than the navigation clearance
    assert NavGrid.from_scene(scene).is_free(0.05 + 0.32, 2.4)
    assert not chk.is_clear(0.05 + 0.32, 2.4)
    mask = chk.clear_mask()
    iz, ix = chk.grid.world_to_cell(2.0, 0.8)
    assert mask[iz, ix] and not mask.flags.writeable
    # facing: the eyes 0.12 m ahead of the pelvis, 0.5 m of free view straight ahead
    assert chk.faces_wall(2.0, 2.95 - 0.12 - 0.45, 0.0)  # facing +Z, wall 0.45 m from the eyes
    assert not chk.faces_wall(2.0, 2.95 - 0.12 - 0.55, 0.0)
    assert not chk.faces_wall(2.0, 2.95 - 0.12 - 0.45, math.pi)  # back to the wall


@pytest.fixture(scope="module")
def val_by_scene() -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for ep in load_split("val"):
        out[ep.scene_id].append(ep)
    return out


def test_every_val_spawn_is_clear_and_not_facing_a_wall(val_by_scene) -> None:
    for sid, episodes in val_by_scene.items():
        scene = load_scene(sid)
        chk = SpawnChecker(scene, NavGrid.from_scene(scene))
        for ep in episodes:
            x, _, z = ep.start_position
            assert chk.is_clear(x, z), ep.episode_id
            assert not chk.faces_wall(x, z, ep.start_yaw_rad), ep.episode_id


def test_val100_spawns_have_no_initial_penetration() -> None:
    """The metric's own reset-time contact query, through the env, for every val100 episode."""
    import gymnasium as gym

    from humanclaw_gym.envs import ENV_ID
    from humanclaw_gym.metrics import initial_penetration

    class _Contacts:
        def __init__(self) -> None:
            self.depth: dict[str, float] = {}

        def on_reset(self, event) -> None:
            self.depth[event.episode.episode_id] = initial_penetration(event.contacts)

    env = gym.make(ENV_ID, split="val100", renderer="tiny", max_steps=1)
    probe = _Contacts()
    env.unwrapped.add_observer(probe, needs=("contacts",))
    try:
        for ep in load_split("val100"):
            env.reset(options={"episode_id": ep.episode_id})
    finally:
        env.close()
    assert len(probe.depth) == 100
    flagged = {k: v for k, v in probe.depth.items() if v > INITIAL_PENETRATION_FLAG_M}
    assert not flagged
    assert max(probe.depth.values()) < 1e-3
