"""The per-frame differential harness's own logic (benchmarks/hp_differential.py), without
the reference release: its stand-in magnum types, its frame conversions, and its engine and
comparison on this package's pybullet backend against itself (a synthetic body in the
release's format)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from paper_release_synthetic import write_release_checkout

from humanclaw_gym.rotations import matrix_from_rotvec, quat_exp

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "hp_differential.py"


@pytest.fixture(scope="module")
def hpd():
    spec = importlib.util.spec_from_file_location("hp_differential_under_test", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_stand_in_magnum_types(hpd) -> None:
    rng = np.random.default_rng(0)
    rotvec, t = rng.normal(size=3), rng.normal(size=3)
    m = hpd._Matrix4.from_(matrix_from_rotvec(rotvec), hpd._Vector3(t))
    np.testing.assert_allclose((m.inverted() @ m).m, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(np.asarray(m.translation), t)
    angle = float(np.linalg.norm(rotvec))
    q = hpd._Quaternion.rotation(angle, hpd._Vector3(rotvec).normalized())
    np.testing.assert_allclose(q.to_matrix(), matrix_from_rotvec(rotvec), atol=1e-12)
    assert hpd._Vector3(3.0, 4.0, 0.0).length() == 5.0
    assert q.scalar == pytest.approx(math.cos(angle / 2))


def test_frames_round_trip_through_the_release_layout(hpd) -> None:
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.skills import SkillCall

    motion = ProceduralMotionGenerator()
    motion.reset(np.array([2.0, 0.0, -1.0]), 0.7, seed=1)
    frames = motion.generate(SkillCall.parse("Turn<left><60>"))
    xb = hpd._to_release(frames)
    assert xb.dtype == np.float32
    np.testing.assert_allclose(hpd._to_ours(xb), frames, atol=1e-5)
    # the release's motion world is a half turn of ours
    np.testing.assert_allclose(xb[:, 0], -(frames[:, 0] - hpd._PELVIS[0]), atol=1e-5)


def _synthetic_body(hpd, release: Path):
    from humanclaw_gym.body.asset import load_body_asset

    asset = load_body_asset(release / "resources/agent/neutral_beta0_handmerged")
    drive = asset.body_model().drive_map
    return hpd.Body(
        "synthetic",
        tuple(asset.links),
        np.flatnonzero(drive[1:] >= 0),
        np.asarray(asset.inertial_origins_m[0], dtype=float),
        asset,
        [],
    )


def test_the_comparison_finds_what_differs_and_nothing_else(hpd, tmp_path) -> None:
    """Our pybullet backend on the engine stand-in against itself: the same arithmetic from
    the same state gives the same commands at every substep (60 of them); the release's
    arithmetic against ours differs in the joint drive and in the first frame's command."""
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.skills import SkillCall

    release = write_release_checkout(tmp_path / "release")
    body = _synthetic_body(hpd, release)
    motion = ProceduralMotionGenerator()
    prev = motion.reset(np.zeros(3), 0.0, seed=0)[-1]
    frames = motion.generate(SkillCall.parse("Walk<forward><normal>"))
    ours = hpd._to_ours(hpd._to_release(np.vstack([prev[None], frames])))
    rng = np.random.default_rng(4)
    state = hpd._random_state(rng, body, ours[0])

    def run(release_arithmetic: bool):
        side = hpd.OurSide("pybullet", body, release, release_arithmetic)
        engine = state.copy()
        side.attach(engine)
        side.chunk(ours[0], ours[1:])
        return engine.log

    release_log, again, own = run(True), run(True), run(False)
    assert len(release_log) == 60
    worst = dict.fromkeys(hpd.TOLERANCES, 0.0)
    hpd._compare_logs(release_log, again, worst)
    assert max(worst.values()) < 1e-12  # the angle of a quaternion to itself: rounding
    hpd._compare_logs(release_log, own, worst)
    assert worst["joint_velocity_rad_s"] > 1e-3 and worst["motor_gain"] > 1.0
    # the first substep's command: none from the release's rule, the frame's own from ours
    first_release, first_ours = release_log[0]["v"][[0, 2]], own[0]["v"][[0, 2]]
    assert np.abs(first_ours - first_release).max() > 1e-3
    with pytest.raises(RuntimeError, match="substeps differ"):
        hpd._compare_logs(release_log, own[:-1], worst)


def test_engine_motor_is_bullet_like(hpd) -> None:
    """A motor with gain g and force > 0 sets the joint velocity that removes g * 0.2 of
    the error in a substep; force 0 leaves the written velocity."""
    engine = hpd.Engine(
        com=np.zeros(3), rot=np.array([0, 0, 0, 1.0]), v=np.zeros(3), w=np.zeros(3),
        q=np.tile([0, 0, 0, 1.0], (2, 1)), qd=np.array([[0.0, 0.0, 3.0], [0.0, 0.0, 3.0]]),
        c=np.zeros(3),
    )  # fmt: skip
    target = quat_exp(np.array([0.5, 0.0, 0.0]))
    engine.motors = {0: (target, 1.0, math.inf), 1: (target, 1.0, 0.0)}
    engine.step(1.0 / 120.0, np.array([0, 1]))
    np.testing.assert_allclose(engine.qd[0], [0.2 * 0.5 * 120.0, 0.0, 0.0])
    np.testing.assert_allclose(engine.qd[1], [0.0, 0.0, 3.0])
    assert len(engine.log) == 1 and engine.log[0]["gain"].tolist() == [1.0, 0.0]
