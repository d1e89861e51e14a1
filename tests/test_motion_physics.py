"""Procedural motion executed by the half-physics on open floor matches the request (10 %)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from humanclaw_gym import SkillCall
from humanclaw_gym.body import heading_yaw
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec


def _open_floor() -> SceneSpec:
    floor = SceneObject(
        object_id=1,
        name="floor",
        category="floor",
        position=(0.0, -0.05, 0.0),
        yaw_rad=0.0,
        parts=(Part("box", (10.0, 0.05, 10.0)),),
    )
    room = Room(0, "living_room", (-10.0, -10.0), (10.0, 10.0))
    return SceneSpec(scene_id="open_floor", rooms=(room,), objects=(floor,))


@pytest.fixture(scope="module")
def physics():
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

    backend = PybulletHalfPhysics()
    backend.build(_open_floor())
    yield backend
    backend.close()


def _execute(physics, calls, yaw=0.3):
    gen = ProceduralMotionGenerator()
    history = gen.reset(np.zeros(3), yaw)
    physics.reset(history[-1])
    before = physics.realized_frame()
    for call in calls[:-1]:
        for frame in gen.generate(call):
            physics.step_frame(frame)
    before = physics.realized_frame()
    for frame in gen.generate(calls[-1]):
        physics.step_frame(frame)
    # let the body settle for a few standing frames (momentum of the chunk)
    return before, physics.realized_frame()


def _body_axes(yaw):
    fwd = np.array([math.sin(yaw), math.cos(yaw)])
    left = np.array([math.cos(yaw), -math.sin(yaw)])
    return fwd, left


@pytest.mark.parametrize("speed,dist", [("slow", 0.2), ("normal", 0.4), ("fast", 0.6)])
def test_walk_distance_after_physics(physics, speed, dist):
    # a walk from standing, then the measured walk (steady gait)
    before, after = _execute(physics, [SkillCall.walk(speed), SkillCall.walk(speed)])
    fwd, _ = _body_axes(float(heading_yaw(before[3:6])))
    moved = (after[[0, 2]] - before[[0, 2]]) @ fwd
    assert moved == pytest.approx(dist, rel=0.10)


@pytest.mark.parametrize("direction,angle", [("left", 30.0), ("right", 60.0), ("left", 120.0)])
def test_turn_angle_after_physics(physics, direction, angle):
    before, after = _execute(physics, [SkillCall.turn(direction, angle)])
    turned = math.degrees(
        (float(heading_yaw(after[3:6])) - float(heading_yaw(before[3:6])) + math.pi) % (2 * math.pi)
        - math.pi
    )
    expected = angle if direction == "left" else -angle
    assert turned == pytest.approx(expected, rel=0.10)


@pytest.mark.parametrize("direction,dist", [("left", 0.3), ("right", 0.5)])
def test_side_step_after_physics(physics, direction, dist):
    before, after = _execute(physics, [SkillCall.side_step(direction, dist)])
    _, left = _body_axes(float(heading_yaw(before[3:6])))
    moved = (after[[0, 2]] - before[[0, 2]]) @ left
    expected = dist if direction == "left" else -dist
    assert moved == pytest.approx(expected, rel=0.10)


@pytest.mark.parametrize("dist", [0.2, 0.6])
def test_step_back_after_physics(physics, dist):
    before, after = _execute(physics, [SkillCall.step_back(dist)])
    fwd, _ = _body_axes(float(heading_yaw(before[3:6])))
    moved = (after[[0, 2]] - before[[0, 2]]) @ fwd
    assert moved == pytest.approx(-dist, rel=0.10)
